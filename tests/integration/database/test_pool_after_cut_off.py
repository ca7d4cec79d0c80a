"""A connection cut off (its statement timed out or its socket broke) makes the pool
replace its other connections before their next use: they lead to the same server,
which may be gone, and each would otherwise wait out its own statement timeout. A block
cancelled on a silent server drops its connection and stays a cancellation."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import asyncpg
import pytest

from gateway.adapters.postgres import (
    Conn,
    DatabaseProbe,
    HeldConnection,
    Pool,
    connection,
    open_pool,
    transaction,
)
from gateway.errors import DatabaseError, DatabaseUnavailable
from tests.support.database_faults import database_proxy, with_hosts


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


@pytest.mark.parametrize("borrow", [connection, transaction])
async def test_a_cancelled_block_on_a_silent_server_stays_a_cancellation(
    database_url: str, borrow: Callable[[Pool], AbstractAsyncContextManager[Conn]]
) -> None:
    """A deadline or shutdown cancelling a statement on a vanished server: the caller
    sees its own cancellation at once, not a `DatabaseUnavailable` one statement timeout
    later (asyncpg's cancel request and ROLLBACK would each wait for the silent server)."""
    async with database_proxy() as proxy:
        url = with_hosts(database_url, proxy.listen)
        async with open_pool(url, max_size=1, command_timeout_s=5.0) as pool:
            async with connection(pool) as conn:
                assert await conn.fetchval("SELECT 1") == 1
            await proxy.set_blackhole(True)

            async def stuck() -> None:
                async with borrow(pool) as conn:
                    await conn.fetchval("SELECT 1")

            task = asyncio.create_task(stuck())
            await asyncio.sleep(0.3)  # the statement is on the wire, unanswered
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert time.monotonic() - started < 1.0


async def test_the_readiness_probe_on_a_silent_server_answers_within_its_timeout(
    database_url: str,
) -> None:
    async with database_proxy() as proxy:
        url = with_hosts(database_url, proxy.listen)
        async with open_pool(url, max_size=1, command_timeout_s=5.0) as pool:
            probe = DatabaseProbe(pool, timeout_s=1.0)
            assert await probe.ping()
            await proxy.set_blackhole(True)
            started = time.monotonic()
            assert not await probe.ping()
            assert time.monotonic() - started < 2.5  # was 1 s + the 5 s statement timeout


@pytest.mark.parametrize("borrow", [connection, transaction])
async def test_a_block_that_dropped_its_connection_itself_keeps_its_cancellation(
    database_url: str, borrow: Callable[[Pool], AbstractAsyncContextManager[Conn]]
) -> None:
    """A writer terminates its connection at its deadline, then the cancellation leaves
    the block: asyncpg has detached that connection, and terminating it again must not
    turn the cancellation into `DatabaseUnavailable` (a shutdown swallowed into a 503)."""
    async with open_pool(database_url, max_size=1) as pool:
        with pytest.raises(asyncio.CancelledError):
            async with borrow(pool) as conn:
                conn.terminate()
                raise asyncio.CancelledError
        async with connection(pool) as conn:
            assert await conn.fetchval("SELECT 1") == 1


async def test_a_serialization_failure_discards_only_its_own_connection(
    database_url: str,
) -> None:
    """A transient refusal on a healthy server (here 40001) is no sign the server is
    gone: the writer's connection is replaced, the pool's others are kept."""
    async with open_pool(database_url, max_size=2) as pool:
        before = await _backend_pids(pool, 2)
        held = HeldConnection(pool)
        conn = await held.get()
        mine = await conn.fetchval("SELECT pg_backend_pid()")
        # What `translate_errors` makes of a 40001: transient, the server answered.
        cause = DatabaseUnavailable("database error 40001")
        cause.__cause__ = asyncpg.SerializationError("could not serialize access")
        await held.discard(cause)
        after = await _backend_pids(pool, 2)
        assert before - {mine} <= after, "a healthy connection was replaced"
