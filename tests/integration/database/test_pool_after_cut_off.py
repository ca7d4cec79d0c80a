"""A connection cut off (its statement timed out or its socket broke) makes the pool
replace its other connections before their next use: they lead to the same server,
which may be gone, and each would otherwise wait out its own statement timeout."""

from __future__ import annotations

import asyncio

import pytest

from gateway.adapters.postgres import HeldConnection, Pool, connection, open_pool, transaction
from gateway.errors import DatabaseError, DatabaseUnavailable


async def _backend_pids(pool: Pool, n: int) -> set[int]:
    """The server pids of `n` connections held at once (so n distinct pool slots)."""
    held = [await pool.acquire() for _ in range(n)]
    try:
        return {await c.fetchval("SELECT pg_backend_pid()") for c in held}
    finally:
        for c in held:
            await pool.release(c)


async def test_a_cut_off_statement_replaces_every_idle_connection(database_url: str) -> None:
    async with open_pool(database_url, max_size=3) as pool:
        before = await _backend_pids(pool, 3)
        assert len(before) == 3
        with pytest.raises(DatabaseUnavailable):
            async with connection(pool) as conn:
                await conn.execute("SELECT pg_sleep(5)", timeout=0.2)
        after = await _backend_pids(pool, 3)
        assert before.isdisjoint(after), "an idle connection of the cut-off server was reused"


async def test_a_cut_off_transaction_replaces_them_too(database_url: str) -> None:
    async with open_pool(database_url, max_size=2) as pool:
        before = await _backend_pids(pool, 2)
        with pytest.raises(DatabaseUnavailable):
            async with transaction(pool) as conn:
                await conn.execute("SELECT pg_sleep(5)", timeout=0.2)
        assert before.isdisjoint(await _backend_pids(pool, 2))


async def test_a_discarded_writer_connection_replaces_them(database_url: str) -> None:
    async with open_pool(database_url, max_size=2) as pool:
        before = await _backend_pids(pool, 2)
        held = HeldConnection(pool)
        await held.get()
        await held.discard()
        assert before.isdisjoint(await _backend_pids(pool, 2))


async def test_a_statement_the_server_refused_keeps_the_pool(database_url: str) -> None:
    """A refusal (here a syntax error) says nothing about the server being gone."""
    async with open_pool(database_url, max_size=2) as pool:
        before = await _backend_pids(pool, 2)
        with pytest.raises(DatabaseError):
            async with connection(pool) as conn:
                await conn.execute("SELEC 1")
        await asyncio.sleep(0)
        assert await _backend_pids(pool, 2) == before
