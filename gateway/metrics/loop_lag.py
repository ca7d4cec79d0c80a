"""How late the event loop runs what is due: every request of a process waits on the
same loop, so a pause there (a long callback, a pass of the cycle collector, a
synchronous call that should not be one) is a pause for every request in flight, and
shows in the tail of `gateway_request_seconds` long before it shows in its median.

`watch_loop_lag` sleeps `interval_s` again and again and observes how much later than
asked each sleep ended. Under load that is about the length of one turn of the loop;
idle, a few microseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: Often enough that a pause of a few tens of milliseconds is seen most of the time,
#: rarely enough to cost nothing measurable (100 wake-ups a second).
INTERVAL_S = 0.01

#: Bounds of `gateway_event_loop_lag_seconds`, finer than a request's: a turn of a
#: loaded loop takes a fraction of a millisecond.
LAG_BUCKETS_S = (
    0.0001,
    0.00025,
    0.0005,
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
    loop = asyncio.get_running_loop()
    while True:
        asked = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        observe(max(0.0, loop.time() - asked))
