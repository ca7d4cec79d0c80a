"""Servers that fail the way a lost database machine does, for the multi-host tests.

- `BlackHole`: accepts TCP connections and never says a word, as a peer that is stuck
  (or a load balancer whose backend is gone); the client waits for the server's first
  message until its own timeout. Counts the connections it saw, and those the client
  closed.
- `SlowProxy`: forwards to a real PostgreSQL, its answers `delay_s` late: a server that
  is up but slow to log in (a loaded machine, one far away).
- `FreezableProxy`: forwards to a real PostgreSQL until `freeze()`, then goes silent on
  every connection, old and new, without closing any: a primary whose machine vanished
  under established connections.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from tests.support.services import ADMIN_DSN, free_port


def with_hosts(dsn: str, *hosts: str) -> str:
    """`dsn` (`postgresql://user@host:port/db?...`) with `hosts` listed before its own."""
    scheme, _, rest = dsn.partition("://")
    user, at, address = rest.partition("@")
    if not at:
        user, address = "", rest
    return f"{scheme}://{user}{at}{','.join(hosts)},{address}"


def dead_address() -> str:
    """`127.0.0.1:PORT` where nothing listens: connections are refused at once."""
    return f"127.0.0.1:{free_port()}"


class BlackHole:
    """A TCP server that accepts and never answers."""

    def __init__(self) -> None:
        self.connections = 0
        self.closed = 0  # connections the client closed
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("not started")
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)  # held open, never written to
        with contextlib.suppress(OSError):
            while await reader.read(65536):
                pass  # whatever the client says goes unanswered
        self.closed += 1

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@contextlib.asynccontextmanager
async def black_hole() -> AsyncIterator[BlackHole]:
    hole = BlackHole()
    await hole.start()
    try:
        yield hole
    finally:
        await hole.stop()


class FreezableProxy:
    """A TCP proxy to the shared PostgreSQL that can go silent on demand."""

    def __init__(self) -> None:
        host_port = ADMIN_DSN.partition("@")[2].partition("/")[0]
        host, _, port = host_port.rpartition(":")
        self._upstream = (host, int(port))
        self.frozen = False
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("not started")
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def freeze(self) -> None:
        """From now on nothing is forwarded either way, and nothing is closed."""
        self.frozen = True

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                if self.frozen:
                    continue  # swallowed: the peer hears nothing, and nothing is closed
                writer.write(data)
                await writer.drain()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        if self.frozen:
            return  # a new connection to a silent host: accepted, never answered
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        self._writers.append(up_writer)
        for task in (self._pump(reader, up_writer), self._pump(up_reader, writer)):
            pump = asyncio.create_task(task)
            self._tasks.add(pump)
            pump.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@contextlib.asynccontextmanager
async def freezable_proxy() -> AsyncIterator[FreezableProxy]:
    proxy = FreezableProxy()
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


class SlowProxy:
    """A TCP proxy to the shared PostgreSQL that passes the server's bytes `delay_s` late.

    The client's bytes go through at once, so the server has the session (with its
    `application_name`) while the client still waits for the answer to its login. Either
    side closing closes the other, as on one real connection: a client that gives up
    ends the server's session.
    """

    def __init__(self, delay_s: float) -> None:
        host_port = ADMIN_DSN.partition("@")[2].partition("/")[0]
        host, _, port = host_port.rpartition(":")
        self._upstream = (host, int(port))
        self.delay_s = delay_s
        self.connections = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def address(self) -> str:
        if self._server is None:
            raise RuntimeError("not started")
        return f"127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float
    ) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                await asyncio.sleep(delay_s)
                writer.write(data)
                await writer.drain()
        writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        self._writers.append(up_writer)
        for task in (
            self._pump(reader, up_writer, 0.0),
            self._pump(up_reader, writer, self.delay_s),
        ):
            pump = asyncio.create_task(task)
            self._tasks.add(pump)
            pump.add_done_callback(self._tasks.discard)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()


@contextlib.asynccontextmanager
async def slow_proxy(delay_s: float) -> AsyncIterator[SlowProxy]:
    proxy = SlowProxy(delay_s)
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()
