"""Scenario 13's attack: connections that need no secret and try to exhaust the gateway,
and the serving process's memory, sampled while they run.

- `hold`: a Stripe request with a large `Content-Length` and no signature; one body byte,
  then the early answer (401, or 503 at capacity) is read, then one more byte every
  `trickle_s`, for as long as the gateway keeps the socket. When the gateway closes it,
  the attacker comes back `reopen_s` later (a bounded set of sockets, as an attacker
  with one address has; reconnecting without pause from many addresses is a volumetric
  flood, for a proxy's per-client limits);
- `flood`: a chunked body of two bytes, then a trailer section that never ends, written
  as fast as the gateway reads, up to `flood_bytes`; then held open;
- `pipelined`: a small `GET /healthz` and, in the same write, a second head of 40-60 KB
  (over `max_header_bytes`), and both answers read.

Every socket is plain asyncio: no HTTP client library smooths over what the server does.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

_READ_TIMEOUT_S = 10.0


def rss_bytes(pid: int) -> int:
    """VmRSS of `pid` and its descendants (`gateway serve --workers N` forks workers)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = (entry / "stat").read_text()
                parents[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    family, frontier = {pid}, [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent and p not in family]
        family.update(children)
        frontier.extend(children)
    total = 0
    for member in family:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{member}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
    return total


@dataclass
class RssSampler:
    """Samples a process tree's RSS every `every_s` until stopped: baseline and peak."""

    pid: int
    every_s: float = 0.2
    baseline: int = 0
    peak: int = 0
    samples: int = 0
    _task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.baseline = self.peak = rss_bytes(self.pid)
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self.peak = max(self.peak, await asyncio.to_thread(rss_bytes, self.pid))
            self.samples += 1
            await asyncio.sleep(self.every_s)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


@dataclass
class AttackRecord:
    """What the attack saw: answers by kind (`0`: closed without an answer), and how
    long the gateway let each hold and flood live."""

    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    hold_s: list[float] = field(default_factory=list)  # held sockets the gateway closed
    hold_open_s: list[float] = field(default_factory=list)  # still open when the attack ended
    flood_sent: list[int] = field(default_factory=list)  # bytes written before the close
    flood_cut: int = 0  # floods the gateway closed before `flood_bytes` were written

    def add(self, kind: str, status: int) -> None:
        self.statuses.setdefault(kind, Counter())[status] += 1

    def figures(self) -> dict[str, object]:
        closed = sorted(self.hold_s)
        return {
            "hold_answers": self._by_status("hold"),
            "holds_closed": len(closed),
            "hold_closed_max_s": closed[-1] if closed else 0.0,
            "holds_open_at_end": len(self.hold_open_s),
            "hold_open_max_s": max(self.hold_open_s, default=0.0),
            "floods_cut": f"{self.flood_cut} / {len(self.flood_sent)}",
            "flood_sent_max_mib": round(max(self.flood_sent, default=0) / 2**20, 1),
            "pipelined_first": self._by_status("pipelined_first"),
            "pipelined_second": self._by_status("pipelined"),
        }

    def _by_status(self, kind: str) -> dict[str, int]:
        names = {0: "closed", -1: "refused"}
        return {names.get(s, str(s)): n for s, n in self.statuses.get(kind, Counter()).items()}


async def _read_answer(reader: asyncio.StreamReader) -> int:
    """One HTTP answer's status, its body read; 0 when the connection closes first."""
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _READ_TIMEOUT_S)
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, TimeoutError):
        return 0
    lines = head.split(b"\r\n")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    with contextlib.suppress(asyncio.IncompleteReadError, OSError, TimeoutError):
        await asyncio.wait_for(reader.readexactly(length), _READ_TIMEOUT_S)
    try:
        return int(lines[0].split()[1])
    except (IndexError, ValueError):
        return 0


async def _closed_within(reader: asyncio.StreamReader, timeout_s: float) -> bool:
    """True if the gateway closes (EOF or reset) within `timeout_s`; unread data dropped."""
    try:
        async with asyncio.timeout(timeout_s):
            while await reader.read(65536):
                pass
        return True
    except TimeoutError:
        return False
    except OSError:
        return True


def _close(writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError, RuntimeError):
        writer.close()


class Attacker:
    """Runs the attack against one gateway until `stop()`."""

    def __init__(self, url: str, *, trickle_s: float, reopen_s: float, seed: int = 13) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.host, self.port = host, int(port)
        self.trickle_s = trickle_s
        self.reopen_s = reopen_s
        self.record = AttackRecord()
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._rng = random.Random(seed)

    def holds(self, n: int) -> None:
        """Start `n` slow-body holds, each coming back after the gateway closes it."""
        self._tasks += [asyncio.create_task(self._hold_forever()) for _ in range(n)]

    async def floods(self, n: int, flood_bytes: int) -> None:
        """Start `n` trailer floods; return once each has sent its head (or failed)."""
        begun = [asyncio.get_running_loop().create_future() for _ in range(n)]
        self._tasks += [asyncio.create_task(self._flood(flood_bytes, f)) for f in begun]
        await asyncio.wait(begun)

    def pipelined(self, n: int) -> None:
        self._tasks += [asyncio.create_task(self._pipelined()) for _ in range(n)]

    async def stop(self) -> None:
        """End the attack: every socket still open is recorded as such and closed."""
        self._stopping.set()
        await asyncio.gather(*self._tasks)

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            return await asyncio.open_connection(self.host, self.port)
        except OSError:
            return None

    async def _hold_forever(self) -> None:
        await asyncio.sleep(self._rng.uniform(0, self.reopen_s))  # not all in one instant
        while not self._stopping.is_set():
            await self._hold()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.reopen_s)

    async def _hold(self) -> None:
        conn = await self._connect()
        if conn is None:
            self.record.add("hold", -1)  # refused at connect: the backlog was full
            return
        reader, writer = conn
        opened = time.monotonic()
        try:
            writer.write(
                b"POST /webhooks/stripe HTTP/1.1\r\nHost: gateway\r\n"
                b"Content-Type: application/json\r\nContent-Length: 500000\r\n\r\n{"
            )
            self.record.add("hold", await _read_answer(reader))
            while not self._stopping.is_set():
                if await _closed_within(reader, self.trickle_s):
                    self.record.hold_s.append(time.monotonic() - opened)
                    return
                writer.write(b" ")
            self.record.hold_open_s.append(time.monotonic() - opened)
        except OSError:
            self.record.hold_s.append(time.monotonic() - opened)
        finally:
            _close(writer)

    async def _flood(self, flood_bytes: int, begun: asyncio.Future[None]) -> None:
        conn = await self._connect()
        if conn is None:
            begun.set_result(None)
            self.record.flood_sent.append(0)
            self.record.flood_cut += 1
            return
        reader, writer = conn
        sent = 0
        lines = (b"X-Trailer: " + b"t" * 8180 + b"\r\n") * 16
        try:
            writer.write(
                b"POST /webhooks/stripe HTTP/1.1\r\nHost: gateway\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"2\r\n{}\r\n0\r\n"
            )
            await asyncio.wait_for(writer.drain(), _READ_TIMEOUT_S)
            begun.set_result(None)
            while sent < flood_bytes and not self._stopping.is_set():
                writer.write(lines)
                await asyncio.wait_for(writer.drain(), _READ_TIMEOUT_S)
                sent += len(lines)
            if sent < flood_bytes:
                return  # the attack ended first: neither cut nor through
            # Written in full: the gateway took it all in. Hold it, as an attacker would.
            while not self._stopping.is_set():
                if await _closed_within(reader, 1.0):
                    return
        except (OSError, TimeoutError):
            self.record.flood_cut += 1
        finally:
            if not begun.done():
                begun.set_result(None)
            self.record.flood_sent.append(sent)
            _close(writer)

    async def _pipelined(self) -> None:
        conn = await self._connect()
        if conn is None:
            self.record.add("pipelined", -1)
            return
        reader, writer = conn
        pad = b"X-Pad: " + b"p" * self._rng.randint(40_000, 60_000) + b"\r\n"
        try:
            writer.write(
                b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n\r\n"
                b"GET /healthz HTTP/1.1\r\nHost: gateway\r\n" + pad + b"\r\n"
            )
            first = await _read_answer(reader)
            self.record.add("pipelined_first", first)
            self.record.add("pipelined", await _read_answer(reader) if first else 0)
        except OSError:
            self.record.add("pipelined", 0)
        finally:
            _close(writer)
