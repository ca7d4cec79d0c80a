"""The multi-host connector against the real PostgreSQL: a refused first host gives way
to the next at once, a black-holed or slow one within the stagger delay, a read-only one
when it says so; the host that worked is tried first next time, no losing attempt leaves
a connection open, and no usable host is one clear error."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator

import asyncpg
import pytest

from chaos.proxy import FaultProxy
from gateway.adapters.postgres import hosts
from gateway.adapters.postgres.hosts import HostConnector, connector_for
from gateway.core.database_hosts import DatabaseHost, stagger_delay_s
from gateway.errors import DatabaseError, DatabaseUnavailable
from tests.support.database_faults import (
    black_hole,
    dead_address,
    slow_proxy,
    with_hosts,
)
from tests.support.pg_pair import PgCluster
from tests.support.services import ADMIN_DSN, wait_until

PER_HOST_S = 1.0
#: The per-host connect timeout of the tests that time a walk: what a black-holed first
#: host would cost without the stagger, far enough above it (0.5 s) and above a login on
#: a loaded machine (the bounds below, 3 s) that a slow run never passes for the other.
CONNECT_S = 10.0
#: A full login on a loaded machine stays under this.
LOGIN_BOUND_S = 3.0
SHARED = DatabaseHost("127.0.0.1", 5432)


def stagger_of(monkeypatch: pytest.MonkeyPatch, stagger_s: float) -> None:
    """Give the connector this stagger delay, longer than a slow login: a test that
    tells "at once" from "after the stagger delay" then has room on a loaded machine."""
    monkeypatch.setattr(hosts, "stagger_delay_s", lambda connect_timeout_s: stagger_s)


def connector(url: str) -> HostConnector:
    made = connector_for(url)
    assert made is not None, "a URL with several hosts gets a connector"
    return made


async def server_port(conn: asyncpg.Connection) -> int:
    return int(await conn.fetchval("SELECT inet_server_port()"))


async def test_a_refused_first_host_gives_way_to_the_second_at_once(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing listens on the first port: the second host is used, without waiting out
    the stagger delay (made longer than any login here), and remembered."""
    stagger_of(monkeypatch, 2 * LOGIN_BOUND_S)
    url = with_hosts(database_url, dead_address())
    walker = connector(url)
    started = time.monotonic()
    conn = await walker.connect(url, timeout=CONNECT_S)
    took_s = time.monotonic() - started
    try:
        assert await server_port(conn) == 5432
    finally:
        await conn.close()
    assert walker.last_good == SHARED
    assert took_s < LOGIN_BOUND_S


async def test_a_black_holed_first_host_costs_the_stagger_delay_then_never_again(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first host that accepts and never answers: the second host's attempt starts
    after the stagger delay and wins, well within the first one's connect timeout
    (asyncpg's own walk would spend its whole budget there); the attempt on the black
    hole is closed before the call returns, and the next connection goes straight to
    the second host: the black hole sees nobody again."""
    async with black_hole() as hole:
        url = with_hosts(database_url, hole.listen)
        walker = connector(url)
        started = time.monotonic()
        conn = await walker.connect(url, timeout=CONNECT_S)
        took_s = time.monotonic() - started
        assert await server_port(conn) == 5432
        await conn.close()
        assert stagger_delay_s(CONNECT_S) <= took_s < LOGIN_BOUND_S < CONNECT_S
        assert hole.connections == 1, "the first host was tried first"
        deadline = time.monotonic() + LOGIN_BOUND_S  # the black hole's side of the close
        while hole.clients_left != 1:
            assert time.monotonic() < deadline, "the losing attempt's connection is open"
            await asyncio.sleep(0.02)
        assert not _connect_attempts(), "no attempt outlives the call"

        # A stagger longer than a slow login: the black hole's turn cannot come while
        # the remembered host logs in, so seeing nobody means it was not tried first.
        stagger_of(monkeypatch, 2 * LOGIN_BOUND_S)
        started = time.monotonic()
        again = await walker.connect(url, timeout=CONNECT_S)
        took_again_s = time.monotonic() - started
        assert await server_port(again) == 5432
        await again.close()
        assert hole.connections == 1, "the remembered host is tried first"
        assert took_again_s < LOGIN_BOUND_S


async def test_a_slow_first_host_loses_and_its_session_is_closed(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first host that is up but slow: the server has the session (it got the login)
    while its answer is on the way, and the second host wins meanwhile. The slow
    attempt is cancelled, so the server's session ends: afterwards the server has
    exactly the one connection the caller holds, also once the slow answer would have
    arrived."""
    app = f"gw-stagger-{time.monotonic_ns()}"
    # The slow host has the stagger delay to show its session, alone; the second host
    # then has the rest of the slow one's delay for its own login.
    stagger_s, delay_s = 1.0, 1.0 + LOGIN_BOUND_S
    stagger_of(monkeypatch, stagger_s)
    async with slow_proxy(delay_s) as slow:
        url = with_hosts(database_url, slow.listen) + "?sslmode=disable"
        walker = connector(url)
        sessions = await asyncpg.connect(database_url)
        try:
            assert await _sessions(sessions, app) == 0
            second_turn = time.monotonic() + stagger_s
            connecting = asyncio.create_task(
                walker.connect(url, timeout=CONNECT_S, server_settings={"application_name": app})
            )
            # Before the second host's turn, a session with this name is the slow host's.
            while await _sessions(sessions, app) != 1:
                assert time.monotonic() < second_turn, "the slow host's server has no login"
                await asyncio.sleep(0.02)
            conn = await connecting
            try:
                assert await server_port(conn) == 5432
                assert slow.connections == 1, "the slow host was tried first"
                assert not _connect_attempts(), "no attempt outlives the call"
                # Past the time the slow login would have completed, had it run on.
                await asyncio.sleep(2 * delay_s)
                assert await _sessions(sessions, app) == 1, "a losing attempt's session is open"
            finally:
                await conn.close()
            assert walker.last_good == SHARED
            deadline = time.monotonic() + 5.0
            while await _sessions(sessions, app) != 0:
                assert time.monotonic() < deadline, "the caller's connection did not close"
                await asyncio.sleep(0.05)
        finally:
            await sessions.close()


async def _sessions(conn: asyncpg.Connection, application_name: str) -> int:
    """The server's sessions with this application_name (pg_stat_activity)."""
    return int(
        await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
            application_name,
        )
    )


def _connect_attempts() -> list[asyncio.Task[object]]:
    """Connection attempts still running (the connector names its tasks)."""
    return [
        t
        for t in asyncio.all_tasks()
        if t.get_name().startswith("database-connect") and not t.done()
    ]


async def test_asyncpg_alone_never_reaches_the_second_host(database_url: str) -> None:
    """Why the connector exists: asyncpg's timeout is one budget for the whole list, so
    the same URL given to asyncpg times out on the black hole however long it is."""
    async with black_hole() as hole:
        url = with_hosts(database_url, hole.listen)
        with pytest.raises(TimeoutError):
            await asyncpg.connect(url, timeout=2 * PER_HOST_S)


async def test_an_abandoned_walk_still_learns_the_usable_host(database_url: str) -> None:
    """A caller that gives up before the second host's turn (a deadline shorter than
    the stagger delay) does not leave the next caller facing the black hole again: the
    walk runs on, remembers the second host, and closes the connection nobody took."""
    async with black_hole() as hole:
        url = with_hosts(database_url, hole.listen)
        walker = connector(url)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(stagger_delay_s(PER_HOST_S) / 2):
                await walker.connect(url, timeout=PER_HOST_S)
        deadline = time.monotonic() + 3 * PER_HOST_S
        while walker.last_good != SHARED:
            assert time.monotonic() < deadline, "the abandoned walk never finished"
            await asyncio.sleep(0.05)
        conn = await walker.connect(url, timeout=PER_HOST_S)
        await conn.close()
        assert hole.connections == 1


async def test_no_usable_host_is_one_error_naming_each_host_without_the_password(
    database_url: str,
) -> None:
    async with black_hole() as hole:
        dead, silent = dead_address(), hole.listen
        url = f"postgresql://postgres:s3cr3t@{dead},{silent}/nowhere"
        with pytest.raises(DatabaseUnavailable) as refused:
            await hosts.connect(url, timeout_s=PER_HOST_S)
    assert str(refused.value) == (
        "no usable database host (target_session_attrs=read-write): "
        f"{dead} refused, {silent} timed out"
    )
    assert "s3cr3t" not in str(refused.value)


async def test_a_list_of_silent_hosts_costs_one_budget_not_a_stagger_per_host() -> None:
    """Sixteen hosts (the cap) that accept and never answer, with a 1 s timeout each:
    the walk ends within its budget of two timeouts (it took 4.3 s when every host
    could start half a second after the last); the hosts it could not start are named,
    and every connection it opened is closed."""
    budget_s = 2 * PER_HOST_S  # `walk_budget_s`
    async with contextlib.AsyncExitStack() as stack:
        holes = [await stack.enter_async_context(black_hole()) for _ in range(16)]
        url = f"postgresql://postgres@{','.join(h.listen for h in holes)}/nowhere"
        started = time.monotonic()
        with pytest.raises(DatabaseUnavailable) as refused:
            await hosts.connect(url, timeout_s=PER_HOST_S)
        took_s = time.monotonic() - started
        assert took_s < budget_s + 0.5, took_s
        assert f"not tried within the {budget_s:g} s connect budget: " in str(refused.value)
        assert not _connect_attempts()
        tried = [h for h in holes if h.connections]
        assert 0 < len(tried) < len(holes)
        await wait_until(lambda: _all_closed(tried), timeout_s=5)


async def _all_closed(holes: list[FaultProxy]) -> bool:
    return all(h.clients_left == h.connections for h in holes)


async def test_a_rejected_login_stops_the_walk(database_url: str) -> None:
    """A server that refuses the role says what every copy of it would say: the error
    comes at once, as libpq reports it, instead of the next host's timeout."""
    async with black_hole() as hole:
        url = f"postgresql://no_such_role@127.0.0.1:5432,{hole.listen}/postgres"
        with pytest.raises(asyncpg.InvalidAuthorizationSpecificationError):
            await hosts.connect(url, timeout_s=PER_HOST_S)
        assert hole.connections == 0


@pytest.fixture(scope="module")
def read_only_server() -> Iterator[PgCluster]:
    """A server of its own whose every session is read-only, as a hot standby's are;
    PostgreSQL 14+ reports `default_transaction_read_only` at login, which asyncpg's
    read-write check reads."""
    cluster = PgCluster()
    cluster.settings = {"default_transaction_read_only": "on"}
    cluster.init()
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.cleanup()


@pytest.mark.slow
async def test_a_read_only_first_host_is_skipped_for_the_writable_one(
    read_only_server: PgCluster,
) -> None:
    """A multi-host URL with no target_session_attrs wants the writable server."""
    url = with_hosts(ADMIN_DSN, f"127.0.0.1:{read_only_server.port}")
    walker = connector(url)
    conn = await walker.connect(url, timeout=PER_HOST_S)
    try:
        assert await server_port(conn) == 5432
        await conn.execute("CREATE TEMP TABLE written (x int)")  # it takes writes
    finally:
        await conn.close()
    assert walker.last_good == SHARED


@pytest.mark.slow
async def test_only_read_only_hosts_is_no_usable_host(read_only_server: PgCluster) -> None:
    ro = f"127.0.0.1:{read_only_server.port}"
    url = f"postgresql://postgres@{ro},{dead_address()}/postgres"
    with pytest.raises(DatabaseUnavailable, match=f"{ro} not matching"):
        await hosts.connect(url, timeout_s=PER_HOST_S)
    # `any`, asked for explicitly, takes the read-only server.
    conn = await hosts.connect(f"{url}?target_session_attrs=any", timeout_s=PER_HOST_S)
    try:
        assert await conn.fetchval("SHOW default_transaction_read_only") == "on"
    finally:
        await conn.close()


async def test_a_missing_database_on_a_list_is_translated_like_any_statement(
    database_url: str,
) -> None:
    """Through the pool, a permanent refusal is a `DatabaseError` with its SQLSTATE."""
    from gateway.adapters.postgres import connection, open_pool

    url = with_hosts(database_url.rpartition("/")[0] + "/no_such_db", dead_address())
    async with open_pool(url, connect_timeout_s=PER_HOST_S) as pool:
        with pytest.raises(DatabaseError) as refused:
            async with connection(pool):
                pass
    assert refused.value.sqlstate == "3D000"
