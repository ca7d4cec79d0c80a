"""A small asyncio TCP fault proxy, in Toxiproxy's vocabulary.

One `FaultProxy` sits in front of one upstream (PostgreSQL, NATS, Redis, the
currency-service, or the gateway itself for slow clients). `set_enabled(False)` is a
hard outage: open connections are cut and new ones refused until it is turned on again.
`set_blackhole(True)` is the network's view of a machine that vanished: nothing is cut
or refused, nothing answers. Open connections stop passing bytes (dropped, no FIN, no
RST) and new ones are accepted and held silent, never connected upstream; a client
learns only from its own timeouts. Turned off, every connection that lived through it is
reset (bytes were dropped, so its stream is broken, as a rebooted machine's peers
would find) and new connections pass again.
Toxics (see `chaos.toxics`) act per direction — upstream is client → server — and apply
to open connections as soon as they are added, as Toxiproxy's do.

Each direction of a connection is a reader task that timestamps chunks into a queue
and a writer task that passes them through the direction's toxics in the order they
were added, so `latency` delays every chunk from its arrival without stalling the
ones behind it. Tests drive a proxy directly; `chaos.api` serves the same operations
over HTTP, so teams that run Toxiproxy can put theirs in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from chaos.toxics import Emit, LinkState, Stream, Toxic, ToxicExists, apply, attach, detach, roll

_CHUNK_BYTES = 32 * 1024


class Link:
    """One client connection and its upstream connection, with per-toxic state."""

    def __init__(
        self,
        proxy: FaultProxy,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    ) -> None:
        self.proxy = proxy
        self.client_r, self.client_w = client
        self.up_r, self.up_w = upstream
        self.states: dict[str, LinkState] = {}
        self.closed = asyncio.Event()
        self.blackholed = proxy.blackhole  # lived through a black hole: reset when it ends

    # --- LinkControl --------------------------------------------------------------
    def close(self) -> None:
        for writer in (self.client_w, self.up_w):
            writer.close()
        self.closed.set()

    def reset(self) -> None:
        for writer in (self.client_w, self.up_w):
            _abort(writer)
        self.closed.set()

    # --- toxics -------------------------------------------------------------------
    def state(self, toxic: Toxic) -> LinkState:
        """This connection's state for `toxic`, rolled again if the toxic changed."""
        state = self.states.get(toxic.name)
        if state is None or state.version != toxic.version:
            if state is not None:
                detach(state)
            state = self.states[toxic.name] = roll(toxic)
            if state.active:
                attach(toxic, state, self)
        return state

    def sync_toxics(self) -> None:
        """Attach new toxics, detach removed ones (called when the proxy's toxics change)."""
        current = {t.name for t in self.proxy.toxics.values()}
        for name in list(self.states):
            if name not in current:
                detach(self.states.pop(name))
        for toxic in self.proxy.toxics.values():
            self.state(toxic)

    async def run(self) -> None:
        self.sync_toxics()
        pumps = [
            asyncio.ensure_future(self._pump(self.client_r, self.up_w, Stream.UPSTREAM)),
            asyncio.ensure_future(self._pump(self.up_r, self.client_w, Stream.DOWNSTREAM)),
        ]
        closed = asyncio.ensure_future(self.closed.wait())
        await asyncio.wait([*pumps, closed], return_when=asyncio.FIRST_COMPLETED)
        if self.proxy.blackhole and not pumps[0].done() and not closed.done():
            # The upstream's end (a killed server's FIN or RST) must not reach the client
            # through a black hole: hold until the client leaves or the black hole ends.
            await asyncio.wait([pumps[0], closed], return_when=asyncio.FIRST_COMPLETED)
        for task in (*pumps, closed):
            task.cancel()
        await asyncio.gather(*pumps, closed, return_exceptions=True)
        for state in self.states.values():
            detach(state)
        if not self.closed.is_set():
            self.close()

    async def _pump(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: Stream
    ) -> None:
        queue: asyncio.Queue[tuple[bytes, float] | None] = asyncio.Queue()

        async def read() -> None:
            try:
                while data := await reader.read(_CHUNK_BYTES):
                    queue.put_nowait((data, time.monotonic()))
            except OSError:
                pass
            queue.put_nowait(None)

        async def write(data: bytes) -> None:
            if not self.proxy.enabled:
                raise ConnectionAbortedError
            if self.proxy.blackhole:
                return  # dropped: the machine behind it is gone, nothing says so
            writer.write(data)
            await writer.drain()

        reading = asyncio.ensure_future(read())
        try:
            while (item := await queue.get()) is not None:
                data, arrived = item
                if self.proxy.blackhole:
                    continue
                await self._through(list(self.proxy.toxics_for(direction)), data, arrived, write)
        except OSError:
            pass
        finally:
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading

    async def _through(self, toxics: list[Toxic], data: bytes, arrived: float, out: Emit) -> None:
        """Send `data` through `toxics` in order, then to `out`."""
        active = [t for t in toxics if self.state(t).active]
        if not active:
            await out(data)
            return
        first, rest = active[0], active[1:]

        async def emit(piece: bytes) -> None:
            await self._through(rest, piece, arrived, out)

        await apply(first, self.state(first), self, data, arrived, emit)


def _abort(writer: asyncio.StreamWriter) -> None:
    """Reset a connection (TCP RST): linger 0, then abort."""
    sock = writer.get_extra_info("socket")
    if sock is not None:  # linger 0: close() sends RST and drops unsent data
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@dataclass
class FaultProxy:
    """Listens on `listen_port` (0: any free port) and forwards to the upstream.

    Two counters let a test see what a client did to it: `connections` is every
    connection accepted, whatever the proxy's state (cut at once while disabled, held
    in a black hole, or forwarded); `clients_left` is the connections held silent in a
    black hole that the client itself closed (not those the proxy cut: the black
    hole's end, `set_enabled(False)`, `close()`).
    """

    upstream_host: str
    upstream_port: int
    listen_port: int = 0
    name: str = "proxy"
    listen_host: str = "127.0.0.1"
    toxics: dict[str, Toxic] = field(default_factory=dict)
    _enabled: bool = True
    _blackhole: bool = False
    _server: asyncio.Server | None = None
    _links: set[Link] = field(default_factory=set)
    _held: set[asyncio.StreamWriter] = field(default_factory=set)  # accepted in a black hole
    connections: int = 0  # every connection accepted
    clients_left: int = 0  # held in a black hole, then closed by the client

    @property
    def listen(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"

    @property
    def upstream(self) -> str:
        return f"{self.upstream_host}:{self.upstream_port}"

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def blackhole(self) -> bool:
        return self._blackhole

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.listen_host, self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    async def set_enabled(self, enabled: bool) -> None:
        """Turn the link on or off; off cuts every open connection at once."""
        self._enabled = enabled
        if not enabled:
            for link in list(self._links):
                link.reset()
            self._release_held()

    async def set_blackhole(self, on: bool) -> None:
        """Swallow everything, silently (on), or pass again (off), resetting every
        connection that lived through the black hole."""
        self._blackhole = on
        if on:
            for link in self._links:
                link.blackholed = True
            return
        for link in [link for link in self._links if link.blackholed]:
            link.reset()
        self._release_held()

    def _release_held(self) -> None:
        for writer in list(self._held):
            _abort(writer)
        self._held.clear()

    # --- toxics -----------------------------------------------------------------------
    def add_toxic(
        self,
        type: str,
        stream: Stream | str = Stream.DOWNSTREAM,
        *,
        name: str = "",
        toxicity: float = 1.0,
        **attributes: float,
    ) -> Toxic:
        """Add a toxic; it applies to open connections at once. Names must be unique."""
        toxic = Toxic(type, Stream(stream), name, toxicity, dict(attributes))
        return self.add(toxic)

    def add(self, toxic: Toxic) -> Toxic:
        if toxic.name in self.toxics:
            raise ToxicExists(f"toxic already exists: {toxic.name}")
        self.toxics[toxic.name] = toxic
        self._sync()
        return toxic

    def update_toxic(self, name: str, doc: dict[str, Any]) -> Toxic:
        toxic = self.toxics[name]
        toxic.update(doc)
        self._sync()
        return toxic

    def remove_toxic(self, name: str) -> None:
        del self.toxics[name]
        self._sync()

    def reset_toxics(self) -> None:
        self.toxics.clear()
        self._sync()

    @contextlib.contextmanager
    def toxic(
        self, type: str, stream: Stream | str = Stream.DOWNSTREAM, **kw: Any
    ) -> Iterator[Toxic]:
        """A toxic for the duration of a `with` block."""
        toxic = self.add_toxic(type, stream, **kw)
        try:
            yield toxic
        finally:
            self.toxics.pop(toxic.name, None)
            self._sync()

    def toxics_for(self, direction: Stream) -> Iterator[Toxic]:
        return (t for t in self.toxics.values() if t.stream is direction)

    def _sync(self) -> None:
        for link in list(self._links):
            link.sync_toxics()

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "listen": self.listen,
            "upstream": self.upstream,
            "enabled": self.enabled,
            "blackhole": self.blackhole,
            "toxics": [t.to_json() for t in self.toxics.values()],
        }

    # --- connections --------------------------------------------------------------------
    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        self.connections += 1
        if not self._enabled:
            client_w.transport.abort()
            return
        if self._blackhole:
            await self._hold(client_r, client_w)
            return
        try:
            upstream = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            client_w.transport.abort()
            return
        link = Link(self, (client_r, client_w), upstream)
        self._links.add(link)
        try:
            await link.run()
        finally:
            self._links.discard(link)

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Accepted, never answered: read and discard until the client gives up."""
        self._held.add(writer)
        try:
            while await reader.read(_CHUNK_BYTES):
                pass
        except OSError:
            pass
        finally:
            if writer in self._held:  # not reset by the black hole's end: the client left
                self._held.discard(writer)
                self.clients_left += 1
                writer.close()

    async def close(self) -> None:
        await self.set_enabled(False)
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 2)
