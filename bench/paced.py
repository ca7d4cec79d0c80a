"""An open-loop load at a fixed rate, for latency figures wrk cannot give.

wrk is closed-loop: a connection sends its next request only once the previous one was
answered, so when the server slows down the load slows with it and the slow moments
are never measured (coordinated omission). Here every request has a due time fixed in
advance (`start + i / rate`), and latencies are counted from that due time, whether the
request could be sent then or had to wait for a free connection. How late requests went
out is reported beside them, so a generator that could not keep its pace is visible.

Requests are complete, pre-signed HTTP/1.1 messages (`bench.events.signed_requests`),
written on keep-alive connections over raw asyncio streams (uvloop when installed): a
few tens of µs of this process's CPU per request, so it can pace thousands a second on
the same cores as the server under test. One request at a time per connection, up to
`connections` of them, opened up front.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)


@dataclass(frozen=True)
class PacedResult:
    """Per request, in the order given: wall-clock times (`time.time()`) it was due, sent
    and answered (0.0 when it failed), its status (0 when it failed), and whether the
    gateway answered `accepted`."""

    rate_per_s: float
    due_s: list[float]
    sent_s: list[float]
    answered_s: list[float]
    statuses: list[int]
    accepted: list[bool]

    @property
    def failed(self) -> int:
        return sum(1 for status in self.statuses if status == 0)

    @property
    def non_2xx(self) -> int:
        return sum(1 for status in self.statuses if status and not 200 <= status < 300)


async def _connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port)


async def _paced(
    host: str, port: int, requests: Sequence[bytes], rate_per_s: float, connections: int
) -> PacedResult:
    count = len(requests)
    sent, answered = [0.0] * count, [0.0] * count
    statuses, accepted = [0] * count, [False] * count
    idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    for conn in await asyncio.gather(*(_connect(host, port) for _ in range(connections))):
        idle.put_nowait(conn)

    async def one(i: int) -> None:
        reader, writer = await idle.get()
        sent[i] = time.time()
        try:
            writer.write(requests[i])
            head = await reader.readuntil(b"\r\n\r\n")
            length = _LENGTH.search(head)
            body = await reader.readexactly(int(length.group(1))) if length else b""
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            writer.close()
            # A fresh connection keeps the pool its size; the request is counted failed.
            with contextlib.suppress(OSError):
                idle.put_nowait(await _connect(host, port))
            return
        answered[i] = time.time()
        statuses[i] = int(head[9:12])
        accepted[i] = b'"accepted"' in body
        idle.put_nowait((reader, writer))

    loop = asyncio.get_running_loop()
    # Due times on the loop's monotonic clock, reported on the wall clock that the
    # database's and the stream's timestamps use.
    start = loop.time() + 0.05
    wall_start = time.time() + (start - loop.time())
    tasks = []
    for i in range(count):
        delay = start + i / rate_per_s - loop.time()
        # Behind schedule, still yield, so the requests already due get written.
        await asyncio.sleep(max(delay, 0.0))
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    while not idle.empty():
        _, writer = idle.get_nowait()
        writer.close()
    due = [wall_start + i / rate_per_s for i in range(count)]
    return PacedResult(rate_per_s, due, sent, answered, statuses, accepted)


def run_paced(
    base_url: str, requests: Sequence[bytes], rate_per_s: float, connections: int = 64
) -> PacedResult:
    """Send `requests` at `rate_per_s` to `base_url` (http://host:port); wait for every
    answer."""
    if rate_per_s <= 0 or connections < 1:
        raise ValueError("rate_per_s must be above 0 and connections at least 1")
    host, _, port = base_url.removeprefix("http://").partition(":")
    runner = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        runner = uvloop.run
    return runner(_paced(host, int(port), requests, rate_per_s, connections))
