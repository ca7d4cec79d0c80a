"""The composition root of `gateway events`: a small pool for one command and, for a
replay, a one-shot JetStream publisher that connects on the first event it publishes.
The CLI opens nothing itself: `list` and `show` read through here too."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from gateway.adapters.jetstream.one_shot import OneShotPublisher, open_one_shot_publisher
from gateway.adapters.postgres import Pool, connection, open_pool
from gateway.adapters.postgres import events as store
from gateway.core.events.filters import EventFilter
from gateway.core.events.rows import EventBrief, EventRow
from gateway.settings import Settings


@contextlib.asynccontextmanager
async def replay_parts(settings: Settings) -> AsyncIterator[tuple[Pool, OneShotPublisher]]:
    """Opened in order: the database, the publisher; closed in reverse."""
    async with (
        open_pool(settings.database_url, max_size=2) as pool,
        open_one_shot_publisher(settings.nats, "gateway-events-replay") as publisher,
    ):
        yield pool, publisher


async def event_rows(
    settings: Settings, f: EventFilter, limit: int
) -> tuple[list[EventBrief], bool]:
    """`events list`: the newest matching events, and whether more match."""
    async with open_pool(settings.database_url, max_size=2) as pool, connection(pool) as conn:
        return await store.list_events(conn, f, limit)


async def event_row(settings: Settings, row_id: int) -> EventRow | None:
    """`events show`: one accepted event, or None when there is no such row."""
    async with open_pool(settings.database_url, max_size=2) as pool, connection(pool) as conn:
        return await store.get_event(conn, row_id)
