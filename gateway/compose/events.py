"""The composition root of `gateway events`: a small pool for one command and, for a
replay, a one-shot JetStream publisher that connects on the first event it publishes."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from gateway.adapters.jetstream.one_shot import OneShotPublisher, open_one_shot_publisher
from gateway.adapters.postgres import Pool, open_pool
from gateway.settings import Settings


@contextlib.asynccontextmanager
async def replay_parts(settings: Settings) -> AsyncIterator[tuple[Pool, OneShotPublisher]]:
    """Opened in order: the database, the publisher; closed in reverse."""
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_one_shot_publisher(settings.nats, "gateway-events-replay") as publisher,
    ):
        yield pool, publisher
