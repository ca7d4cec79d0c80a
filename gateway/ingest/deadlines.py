"""Request deadlines enforced by one sweeping task instead of a timer per request.

`asyncio.timeout` schedules and cancels a timer for every request; on the ingestion
path that bookkeeping cost more CPU than the body read it guarded. The deadlines here
are seconds long, so checking them every `tick_s` is precise enough, and each request
pays only two dictionary writes.
"""

from __future__ import annotations

import asyncio
import contextlib


class Deadlines:
    """Cancels a registered task once its deadline passes.

    The task learns it was its deadline, not a shutdown, through `expired()`.
    """

    def __init__(self, tick_s: float = 0.1) -> None:
        self.tick_s = tick_s
        self._due: dict[asyncio.Task[object], float] = {}
        self._expired: set[asyncio.Task[object]] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def set(self, task: asyncio.Task[object], due: float) -> None:
        """Cancel `task` at loop time `due` (replacing any earlier deadline)."""
        self._due[task] = due

    def clear(self, task: asyncio.Task[object]) -> None:
        """The task finished the guarded part in time."""
        self._due.pop(task, None)

    def expired(self, task: asyncio.Task[object]) -> bool:
        """True (once) if `task` was cancelled because its deadline passed."""
        if task in self._expired:
            self._expired.discard(task)
            return True
        return False

    def sweep(self, now: float) -> int:
        """Cancel every task whose deadline is at or before `now`; return how many."""
        late = [task for task, due in self._due.items() if due <= now]
        for task in late:
            del self._due[task]
            self._expired.add(task)
            task.cancel()
        return len(late)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.tick_s)
            self.sweep(loop.time())

    def start(self) -> None:
        self._sweeper = asyncio.create_task(self.run(), name="request-deadlines")

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
