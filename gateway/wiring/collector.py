"""Python's cycle collector in a long-running process (`gateway settle`, `gateway serve`).

A settlement batch makes and drops a few thousand small objects (messages, events,
items, records), so with Python's default thresholds the collector runs every few
hundred allocations, and every so often goes through every object the process holds,
most of them the modules imported at start-up, which never become garbage: in
`bench.settlement` that came to 6 µs an event of the worker's CPU with ordering off and
9 with it on, a full pass taking about 25 ms in the middle of a batch. Once the worker
has started, `settle_down` moves what exists then out of the collector's sight
(`gc.freeze`) and lets the young generation grow to `YOUNG_THRESHOLD` objects before a
pass; garbage in cycles then waits a little longer to be freed.

In `gateway serve` the same passes are pauses of the event loop, so of every request in
flight: in the first load after start, while the heap still grew, `make bench` saw a
pass over the oldest generation every three seconds, of 26-38 ms each, and a p99 of
20-39 ms; with the modules frozen, none during the load, and a p99 of 16 ms.
"""

from __future__ import annotations

import gc

#: Allocations (less deallocations) of tracked objects between two passes over the
#: youngest generation: Python's default is 700 (2,000 from 3.13).
YOUNG_THRESHOLD = 20_000


def settle_down() -> None:
    """After start-up: collect once, keep what is left out of later passes, and pass
    over the young generation less often."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
