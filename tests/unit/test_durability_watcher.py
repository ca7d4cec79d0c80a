"""The durability watcher with readings handed in: which start-up readings refuse when a
synchronous standby is required, and which readings are logged (once per change)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from gateway.core.health.durability import Durability, DurabilityReason, DurabilityState
from gateway.errors import DatabaseError, DatabaseNotDurable, DatabaseUnavailable
from gateway.metrics import Metrics
from gateway.wiring.durability import DurabilityWatcher

S = DurabilityState
R = DurabilityReason
SYNCHRONOUS = Durability(S.SYNCHRONOUS, R.STANDBYS_STREAMING, "1 streaming", 1)
AT_RISK = Durability(S.AT_RISK, R.NO_STANDBY_CONFIGURED, "no standby")
WAITING = Durability(S.WAITING_FOR_STANDBY, R.TOO_FEW_STREAMING, "0 streaming")
HIDDEN = Durability(S.UNKNOWN, R.STANDBYS_HIDDEN, "grant it pg_monitor")
DOWN = DatabaseUnavailable("database unreachable: ConnectionRefusedError")


def watcher(
    answers: list[Durability | Exception], required: bool = False
) -> tuple[DurabilityWatcher, Metrics]:
    """A watcher whose readings are `answers`, in turn."""
    given: Iterator[Durability | Exception] = iter(answers)

    async def read() -> Durability:
        answer = next(given)
        if isinstance(answer, Exception):
            raise answer
        return answer

    metrics = Metrics()
    return DurabilityWatcher(read, metrics, required=required, interval_s=30), metrics


def said(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


@pytest.fixture(autouse=True)
def _capture(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="gateway.wiring.durability")


@pytest.mark.parametrize("reading", [AT_RISK, WAITING, HIDDEN])
async def test_required_refuses_every_answer_but_synchronous(
    reading: Durability, caplog: pytest.LogCaptureFixture
) -> None:
    """The refusal names the state and the reason; no warning is logged beside it."""
    w, _ = watcher([reading], required=True)
    with pytest.raises(DatabaseNotDurable) as refused:
        await w.check_at_start()
    assert (refused.value.state, refused.value.reason) == (str(reading.state), reading.reason)
    assert refused.value.key == "database.require_synchronous_standby"
    assert said(caplog) == []


async def test_required_and_synchronous_starts_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w, _ = watcher([SYNCHRONOUS], required=True)
    await w.check_at_start()
    assert said(caplog) == [("INFO", "database durability: synchronous: 1 streaming")]
    assert caplog.records[0].__dict__["required"] is True


@pytest.mark.parametrize("required", [False, True])
async def test_an_unreachable_database_does_not_stop_start_up(
    required: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """Unknown until it answers; its first answer is then logged like a start-up one
    (never a refusal: the process is already serving)."""
    w, metrics = watcher([DOWN, DOWN, AT_RISK, AT_RISK], required=required)
    await w.check_at_start()
    assert w.last.state is S.UNKNOWN
    assert "did not answer" in w.last.reason
    assert metrics.database_durability.get(state="unknown") == 1.0
    assert await w.read_once() is None
    assert await w.read_once() == AT_RISK
    assert await w.read_once() == AT_RISK
    assert said(caplog) == [
        ("INFO", "database durability not read: the database did not answer; read again "
                 "every 30 s"),
        ("WARNING", "database durability: at_risk: no standby"),
    ]  # fmt: skip


async def test_each_change_of_state_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    """An outage between two readings in the same state is no change."""
    w, metrics = watcher([SYNCHRONOUS, SYNCHRONOUS, WAITING, DOWN, WAITING, AT_RISK, SYNCHRONOUS])
    await w.check_at_start()
    for _ in range(6):
        await w.read_once()
    assert said(caplog) == [
        ("INFO", "database durability: synchronous: 1 streaming"),
        ("WARNING", "database durability: waiting_for_standby: 0 streaming"),
        ("WARNING", "database durability: at_risk: no standby"),
        ("INFO", "database durability: synchronous: 1 streaming"),
    ]
    warning = caplog.records[1].__dict__
    assert (warning["state"], warning["reason"], warning["synchronous_standbys"]) == (
        "waiting_for_standby",
        "0 streaming",
        0,
    )
    assert warning["reason_code"] == "too_few_streaming"
    got = {s: metrics.database_durability.get(state=str(s)) for s in S}
    assert got == {S.SYNCHRONOUS: 1.0, S.AT_RISK: 0.0, S.WAITING_FOR_STANDBY: 0.0, S.UNKNOWN: 0.0}
    assert metrics.database_synchronous_standbys.get() == 1.0


async def test_a_failed_query_is_unknown_and_never_ends_the_watcher(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w, _ = watcher([DatabaseError("database error 42501: InsufficientPrivilege", "42501"),
                    KeyError("state")])  # fmt: skip
    await w.check_at_start()
    assert w.last.reason == (
        "the durability query failed: database error 42501: InsufficientPrivilege"
    )
    assert await w.read_once() == Durability(
        S.UNKNOWN, R.QUERY_FAILED, "the durability query failed: KeyError"
    )
    assert [level for level, _ in said(caplog)] == ["WARNING"]  # one state, one line


class SlowToStop:
    """A reading that never answers and, once cancelled, takes until `release` to stop."""

    def __init__(self) -> None:
        self.reading = asyncio.Event()  # the reading has begun
        self.stopping = asyncio.Event()  # it has been cancelled
        self.release = asyncio.Event()  # it may now stop

    async def read(self) -> Durability:
        self.reading.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.stopping.set()
            await self.release.wait()
            raise
        raise AssertionError("never answers")

    async def closing(
        self, w: DurabilityWatcher
    ) -> tuple[asyncio.Task[None], asyncio.Task[object]]:
        """Start `w`, and its close once a reading is under way; return the close and the
        reading's task, once close has cancelled the reading and waits for it to stop."""
        w.start()
        await self.reading.wait()
        task = next(t for t in asyncio.all_tasks() if t.get_name() == "database-durability")
        closing = asyncio.create_task(w.close())
        await self.stopping.wait()
        return closing, task


async def test_close_waits_for_a_reading_that_is_slow_to_stop() -> None:
    """The reading in progress is cancelled and waited for: close returns once it has
    ended, not before."""
    slow = SlowToStop()
    closing, task = await slow.closing(DurabilityWatcher(slow.read, Metrics(), interval_s=0))
    await asyncio.sleep(0)
    assert not closing.done(), "close returned while the reading was still running"
    slow.release.set()
    await closing
    assert task.cancelled()


async def test_cancelling_the_caller_of_close_is_not_swallowed() -> None:
    """A shutdown cut short while the reading is slow to stop: the caller's own
    cancellation propagates out of close (it is not mistaken for the task's)."""
    slow = SlowToStop()
    closing, task = await slow.closing(DurabilityWatcher(slow.read, Metrics(), interval_s=0))
    closing.cancel()
    with pytest.raises(asyncio.CancelledError):
        await closing
    assert closing.cancelled()
    assert not task.done(), "the reading is still finishing on its own"
    slow.release.set()
    await asyncio.wait([task])
    assert task.cancelled()
