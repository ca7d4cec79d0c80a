"""The throwaway primary/standby pair the failover scenario stands on: a row committed on
the primary is on the standby; the primary's machine lost and the standby promoted, the
row is still there and the new primary takes writes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.support.pg_pair import PgPair

pytestmark = pytest.mark.slow


@pytest.fixture
async def sync_pair() -> AsyncIterator[PgPair]:
    pair = PgPair(synchronous=True)
    try:
        await asyncio.to_thread(pair.start_primary)
        await pair.create_database()
        await asyncio.to_thread(pair.start_standby)
        await pair.wait_streaming()
        yield pair
    finally:
        await asyncio.to_thread(pair.cleanup)


async def _execute(dsn: str, statement: str, *args: object) -> None:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(statement, *args)
    finally:
        await conn.close()


async def _values(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        return [r["v"] for r in await conn.fetch("SELECT v FROM t ORDER BY v")]
    finally:
        await conn.close()


async def test_a_synchronous_commit_survives_the_primarys_loss(sync_pair: PgPair) -> None:
    pair = sync_pair
    await _execute(pair.primary_dsn, "CREATE TABLE t (v text PRIMARY KEY)")
    await _execute(pair.primary_dsn, "INSERT INTO t VALUES ('before')")
    # Synchronous: the commit returned once the standby had it (replayed soon after).
    await pair.wait_replayed()
    assert await _values(pair.standby_dsn) == ["before"]
    with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
        await _execute(pair.standby_dsn, "INSERT INTO t VALUES ('refused')")

    await asyncio.to_thread(pair.kill_primary)
    with pytest.raises(OSError):
        await asyncpg.connect(pair.primary_dsn, timeout=2)
    await pair.promote()

    assert await _values(pair.standby_dsn) == ["before"]
    # No synchronous_standby_names came along with the base backup: a commit returns.
    await asyncio.wait_for(_execute(pair.standby_dsn, "INSERT INTO t VALUES ('after')"), 10)
    assert await _values(pair.standby_dsn) == ["after", "before"]


async def test_the_multi_host_url_finds_the_writable_server(sync_pair: PgPair) -> None:
    pair = sync_pair
    url = pair.multi_host_url()
    assert url == (
        f"postgresql://postgres@127.0.0.1:{pair.primary.port},127.0.0.1:{pair.standby.port}"
        "/chaos?target_session_attrs=read-write"
    )
    conn = await asyncpg.connect(url, timeout=5)
    try:
        assert await conn.fetchval("SELECT inet_server_port()") == pair.primary.port
    finally:
        await conn.close()
    await asyncio.to_thread(pair.kill_primary)
    await pair.promote()
    conn = await asyncpg.connect(url, timeout=5)
    try:
        assert await conn.fetchval("SELECT inet_server_port()") == pair.standby.port
    finally:
        await conn.close()


async def test_an_asynchronous_pair_streams_without_waiting() -> None:
    pair = PgPair(synchronous=False)
    try:
        await asyncio.to_thread(pair.start)
        await pair.wait_streaming()
        rows = await pair.primary.fetch("SHOW synchronous_standby_names")
        assert rows[0][0] == ""
        await pair.create_database()
        await pair.wait_replayed()
        assert await pair.standby.fetch("SELECT 1 FROM pg_database WHERE datname = 'chaos'")
    finally:
        await asyncio.to_thread(pair.cleanup)
