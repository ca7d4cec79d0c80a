"""One provider's pace: at most `rate_per_s` requests started a second and
`concurrency` under way at once, so a backlog after an outage reaches the API no faster
than its read limit allows."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager


class Pace:
    """Starts spaced `1 / rate_per_s` apart, at most `concurrency` under way."""

    def __init__(
        self,
        rate_per_s: float,
        concurrency: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not rate_per_s > 0 or concurrency < 1:  # `not >`: a NaN rate is refused too
            raise ValueError("a pace needs a positive rate and at least one slot")
        self._gap_s = 1.0 / rate_per_s
        self._slots = asyncio.Semaphore(concurrency)
        self._clock = clock
        self._sleep = sleep
        self._next_s = float("-inf")

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Hold a slot from this request's turn to its end."""
        async with self._slots:
            # Each caller books the next start at once (no await in between), so two
            # callers never get the same one.
            now = self._clock()
            start = max(now, self._next_s)
            self._next_s = start + self._gap_s
            if start > now:
                await self._sleep(start - now)
            yield
