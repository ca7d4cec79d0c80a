"""The Redis client (the rate cache's store), opened and closed by the composition root."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import redis.asyncio as aioredis


@contextlib.asynccontextmanager
async def open_redis(url: str, *, timeout_s: float = 0.5) -> AsyncIterator[aioredis.Redis]:
    """A client for the block's lifetime. It connects on first use, so a Redis that is down
    costs each command at most `timeout_s` (the cache is a fallback, never a dependency)."""
    client = aioredis.from_url(url, socket_connect_timeout=timeout_s, socket_timeout=timeout_s)
    try:
        yield client
    finally:
        await client.aclose()
