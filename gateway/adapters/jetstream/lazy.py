"""A NATS connection opened when first asked for and then kept (reconnecting by itself),
for a process that only asks JetStream questions now and then: the console starts while
NATS is down, and a page never waits long for it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import nats

from gateway.settings.sections import NatsSettings

#: How long one question may wait for NATS to connect.
CONNECT_TIMEOUT_S = 1.0


class LazyNats:
    """`await lazy.jetstream()`: a JetStream context, connecting first if need be
    (`gateway.adapters.jetstream.consumer_info` takes this as it takes a client)."""

    def __init__(self, settings: NatsSettings, name: str = "gateway-console") -> None:
        self._settings = settings
        self._name = name
        self._nc: Any = None
        self._lock = asyncio.Lock()

    async def jetstream(self) -> Any:
        async with self._lock:
            if self._nc is None or self._nc.is_closed:
                self._nc = await nats.connect(
                    self._settings.servers,
                    name=self._name,
                    connect_timeout=CONNECT_TIMEOUT_S,
                    allow_reconnect=True,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=1,
                )
        return self._nc.jetstream(timeout=self._settings.request_timeout_s)

    async def close(self) -> None:
        if self._nc is not None and not self._nc.is_closed:
            with contextlib.suppress(Exception):
                await self._nc.close()
