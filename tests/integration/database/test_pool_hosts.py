"""The pool and migrations on a multi-host URL: session settings and the statement timeout
apply as on one host, `/readyz`'s 1 s probe gets past a black-holed first host, and a
pooled connection whose server went silent is freed within the statement timeout, the
next one found on the other host within the stagger delay."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import pytest

from gateway.adapters.postgres import (
    Conn,
    DatabaseProbe,
    Pool,
    connection,
    migrate,
    open_pool,
    transaction,
)
from gateway.core.database_hosts import stagger_delay_s
from gateway.errors import DatabaseUnavailable
from tests.support.database_faults import (
    black_hole,
    database_proxy,
    dead_address,
    with_hosts,
)


async def test_the_pool_keeps_its_session_settings_and_statement_timeout(
    database_url: str,
) -> None:
    """`server_settings` and `command_timeout_s` reach connections the connector opens."""
    url = with_hosts(database_url, dead_address())
    settings = {"application_name": "gw-multi-host", "lock_timeout": "1234ms"}
    async with open_pool(url, server_settings=settings, command_timeout_s=0.5) as pool:
        async with connection(pool) as conn:
            assert await conn.fetchval("SHOW application_name") == "gw-multi-host"
            assert await conn.fetchval("SHOW lock_timeout") == "1234ms"
            assert await conn.fetchval("SELECT count(*) FROM processed_webhooks") == 0
        with pytest.raises(DatabaseUnavailable):
            async with connection(pool) as conn:
                await conn.execute("SELECT pg_sleep(2)")


async def test_the_readiness_probe_gets_past_a_black_holed_first_host(
    database_url: str,
) -> None:
    """The probe gives up after 1 s, well before the 5 s per-host timeout: the second
    host's attempt starts after the stagger delay, so the very first probe says ready
    (otherwise a gateway without traffic would not become ready before the walk learnt
    the second host), and later connections ask the second host first."""
    async with black_hole() as hole:
        url = with_hosts(database_url, hole.listen)
        async with open_pool(url, connect_timeout_s=5.0) as pool:
            probe = DatabaseProbe(pool)
            assert await probe.ping() is True
            assert hole.connections == 1
            for _ in range(3):  # once found, new connections ask the second host first
                await pool.expire_connections()
                assert await probe.ping() is True
            assert hole.connections == 1


@pytest.mark.parametrize("borrow", [connection, transaction])
async def test_a_silent_server_frees_its_pooled_connection_within_the_statement_timeout(
    database_url: str, borrow: Callable[[Pool], AbstractAsyncContextManager[Conn]]
) -> None:
    """The primary's machine vanishes under an established pooled connection: the
    statement fails after `command_timeout_s` and the connection is dropped then (not
    after a cancel request, or a ROLLBACK, waits out the same timeout again), and the
    pool's next connection reaches the other host after the stagger delay (the
    remembered, silent host is tried first, and left unanswered)."""
    command_s, connect_s = 1.0, 1.0
    async with database_proxy() as proxy:
        url = with_hosts(database_url, proxy.listen)
        async with open_pool(
            url, max_size=1, connect_timeout_s=connect_s, command_timeout_s=command_s
        ) as pool:
            async with connection(pool) as conn:
                assert await conn.fetchval("SELECT 1") == 1
            assert proxy.connections == 1  # the first host worked, and is remembered
            await proxy.set_blackhole(True)

            started = time.monotonic()
            with pytest.raises(DatabaseUnavailable):
                async with borrow(pool) as conn:
                    await conn.fetchval("SELECT 1")
            freed_s = time.monotonic() - started
            assert command_s <= freed_s < 1.5 * command_s

            started = time.monotonic()
            async with connection(pool) as conn:
                assert await conn.fetchval("SELECT inet_server_port()") == 5432
            moved_s = time.monotonic() - started
            # Not at once: the remembered, silent host was tried first.
            assert stagger_delay_s(connect_s) <= moved_s < connect_s


async def test_migrate_finds_the_writable_host(empty_database_url: str) -> None:
    """`gateway migrate` connects on its own, through the same walk."""
    url = with_hosts(empty_database_url, dead_address())
    applied = await migrate(url)
    assert applied and applied[0].startswith("001_")
    assert await migrate(url) == []
