"""Is the database answering, and what a stream worker does while it is not.

`DatabaseWatch` runs the decisions of `gateway.core.health.step_aside` for one worker: it
tracks the work in hand (each task with the messages it holds), probes the database when
that work is slow or a statement failed for want of it, and, when the probe goes
unanswered, steps aside: fetching stops (`serving` is cleared), the work in hand is
cancelled (its connections are dropped without a word to the silent server: see
`connection`) and its messages are handed back through the worker's `hand_back` at once,
so another worker takes them. It probes on until the database answers, then sets
`serving` again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from gateway.adapters.postgres import hosts
from gateway.core.health.step_aside import Footing, Move, StepAsidePolicy, after_probe, probe_due

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How often the watch looks at the work in hand.
TICK_S = 0.2
#: How long cancelled work gets to end before its messages are handed back anyway (a
#: cancelled statement ends at once; anything left is answered again later, harmlessly).
CANCEL_GRACE_S = 0.5


async def answers(dsn: str, timeout_s: float) -> bool:
    """Whether the database answers `SELECT 1` on a fresh connection within `timeout_s`.

    A fresh connection, not a pooled one: the pool's may all be held by statements stuck
    on the silent server (acquiring would wait for them), and its idle ones lead to the
    host that went silent, where a new one follows the URL's host list.
    """
    conn = None
    try:
        async with asyncio.timeout(timeout_s):
            conn = await hosts.connect(dsn, timeout_s=timeout_s)
            return bool(await conn.fetchval("SELECT 1") == 1)
    except Exception:  # unanswered, refused, timed out: all mean "not now"
        return False
    finally:
        if conn is not None:
            conn.terminate()  # no goodbye: the server may have gone silent meanwhile


class DatabaseWatch(Generic[T]):
    """Steps a worker aside while its database does not answer (see the module)."""

    def __init__(
        self,
        probe: Callable[[], Awaitable[bool]],
        hand_back: Callable[[list[T]], Awaitable[None]],
        *,
        worker: str,
        policy: StepAsidePolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy or StepAsidePolicy()
        self.serving = asyncio.Event()
        self.serving.set()
        self.stepped_aside = 0  # times it stepped aside (a figure for logs and tests)
        self._probe = probe
        self._hand_back = hand_back
        self._worker = worker
        self._clock = clock
        self._work: dict[asyncio.Task[Any], tuple[float, list[T]]] = {}
        self._suspected = False
        self._probed_at = float("-inf")

    @property
    def footing(self) -> Footing:
        return Footing.SERVING if self.serving.is_set() else Footing.ASIDE

    def track(self, task: asyncio.Task[Any], held: Sequence[T]) -> None:
        """Work under way that holds `held` until it ends."""
        self._work[task] = (self._clock(), list(held))
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._work.pop(task, None)

    def suspect(self) -> None:
        """A statement failed for want of the database: probe at the next look."""
        self._suspected = True

    async def until_serving(self, stop: asyncio.Event, timeout_s: float | None = None) -> None:
        """Wait until the worker may fetch again, `stop` is set, or `timeout_s` passed."""
        waits = [asyncio.ensure_future(self.serving.wait()), asyncio.ensure_future(stop.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def run(self) -> None:
        """Watch until cancelled."""
        while True:
            await asyncio.sleep(TICK_S)
            now = self._clock()
            oldest = min((started for started, _ in self._work.values()), default=None)
            footing = self.footing
            due = probe_due(
                footing,
                None if oldest is None else now - oldest,
                now - self._probed_at,
                self._suspected,
                self.policy,
            )
            if not due:
                continue
            self._suspected = False
            answered = await self._probe()
            self._probed_at = self._clock()
            move = after_probe(footing, answered)
            if move is Move.STEP_ASIDE:
                await self.step_aside()
            elif move is Move.RESUME:
                log.warning("database answers again; fetching again", extra=self._fields())
                self.serving.set()

    async def step_aside(self) -> None:
        """Stop fetching; cancel the work in hand and hand its messages back at once."""
        self.serving.clear()
        self.stepped_aside += 1
        work, self._work = self._work, {}
        log.warning(
            "database not answering; stepping aside",
            extra={**self._fields(), "handed_back": sum(len(h) for _, h in work.values())},
        )
        for task in work:
            task.cancel()
        if work:
            await asyncio.wait(work, timeout=CANCEL_GRACE_S)
        held = [item for _, items in work.values() for item in items]
        try:
            await self._hand_back(held)
        except Exception:  # not handed back: redelivered after ack_wait all the same
            log.exception("messages not handed back", extra=self._fields())

    def _fields(self) -> dict[str, object]:
        return {"worker": self._worker, "timeout_s": self.policy.probe_timeout_s}
