"""A small asyncio TCP fault proxy, in Toxiproxy's vocabulary.

One `FaultProxy` sits in front of one upstream (PostgreSQL, NATS, Redis, the
currency-service). Toggling `enabled` off is a hard outage: open connections are cut and
new ones refused until it is turned on again. `latency_s` delays every chunk in both
directions. Tests drive it directly; teams that run Toxiproxy can put theirs in its place.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from dataclasses import dataclass, field


@dataclass
class FaultProxy:
    """Listens on `listen_port` and forwards to `upstream_host:upstream_port`."""

    upstream_host: str
    upstream_port: int
    listen_port: int = 0
    latency_s: float = 0.0
    jitter_s: float = 0.0
    _enabled: bool = True
    _server: asyncio.Server | None = None
    _links: set[asyncio.Task[None]] = field(default_factory=set)
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.listen_port)
        self.listen_port = self._server.sockets[0].getsockname()[1]

    @property
    def enabled(self) -> bool:
        return self._enabled

    async def set_enabled(self, enabled: bool) -> None:
        """Turn the link on or off; off cuts every open connection at once."""
        self._enabled = enabled
        if not enabled:
            for writer in list(self._writers):
                writer.transport.abort()
            self._writers.clear()

    async def _accept(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        if not self._enabled:
            client_w.transport.abort()
            return
        try:
            up_r, up_w = await asyncio.open_connection(self.upstream_host, self.upstream_port)
        except OSError:
            client_w.transport.abort()
            return
        self._writers.update((client_w, up_w))
        pumps = [
            asyncio.ensure_future(self._pump(client_r, up_w)),
            asyncio.ensure_future(self._pump(up_r, client_w)),
        ]
        await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        for task in pumps:
            task.cancel()
        for writer in (client_w, up_w):
            self._writers.discard(writer)
            writer.transport.abort()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while data := await reader.read(65536):
                if self.latency_s or self.jitter_s:
                    await asyncio.sleep(self.latency_s + random.uniform(0, self.jitter_s))
                if not self._enabled:
                    return
                writer.write(data)
                await writer.drain()

    async def close(self) -> None:
        await self.set_enabled(False)
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
