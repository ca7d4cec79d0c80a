"""How late the event loop runs what is due: every request of a process waits on the
same loop, so a pause there (a long callback, a pass of the cycle collector, a
synchronous call that should not be one) is a pause for every request in flight, and
shows in the tail of `gateway_request_seconds` long before it shows in its median.

`watch_loop_lag` sleeps `interval_s` again and again and observes how much later than
asked each sleep ended, by the process's monotonic clock. Under load that is about the
length of one turn of the loop. On uvloop (what `gateway serve` runs on when installed)
timers fire on whole milliseconds, so a figure under a millisecond or two says "no
pause", not how short a turn was.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

#: Often enough that a pause of a few tens of milliseconds is seen most of the time,
#: rarely enough to cost nothing measurable (100 wake-ups a second).
INTERVAL_S = 0.01

#: Bounds of `gateway_event_loop_lag_seconds`: from the millisecond uvloop's timers
#: resolve to.
LAG_BUCKETS_S = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)


async def watch_loop_lag(observe: Callable[[float], None], interval_s: float = INTERVAL_S) -> None:
    """Observe the lateness of a sleep of `interval_s`, in seconds, until cancelled."""
    if interval_s <= 0:
        raise ValueError("interval_s must be positive")
    while True:
        asked = time.monotonic() + interval_s
        await asyncio.sleep(interval_s)
        observe(max(0.0, time.monotonic() - asked))
