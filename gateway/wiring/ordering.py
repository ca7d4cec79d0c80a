"""The composition root of `gateway ordering` (and of `gateway dlq resolve` of a row that
holds a key): one small pool for one command; the CLI opens nothing itself."""

from __future__ import annotations

from gateway.adapters.postgres import connection
from gateway.adapters.postgres.ordering import admin as store
from gateway.core.ordering.admin import KeyListing, Release
from gateway.settings import Settings
from gateway.wiring.ops import database


async def key_states(
    settings: Settings, *, held: bool, provider: str | None, limit: int
) -> tuple[list[KeyListing], bool]:
    """`ordering keys`: the keys shown, and whether more match."""
    async with database(settings) as pool, connection(pool) as conn:
        return await store.list_keys(conn, held=held, provider=provider, limit=limit)


async def release_key(
    settings: Settings, provider: str, order_key: str, note: str, actor: str
) -> Release:
    """`ordering release`: what releasing the key did."""
    async with database(settings) as pool, connection(pool) as conn:
        return await store.release_key(conn, provider, order_key, note, actor)


async def release_holder(settings: Settings, dlq_id: int, note: str, actor: str) -> Release | None:
    """`dlq resolve` of a row: the release, when the row holds a key; else None."""
    async with database(settings) as pool, connection(pool) as conn:
        return await store.release_holder(conn, dlq_id, note, actor)
