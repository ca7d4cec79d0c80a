"""Fixtures shared by tests/ and chaos/: per-test databases, NATS, Redis, the stub."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from gateway.adapters.postgres import migrate
from gateway.adapters.postgres.webhooks import WHOLE_STATEMENTS
from tests.support.receiver import Receiver
from tests.support.services import (
    REDIS_URL,
    NatsServer,
    create_database,
    drop_database,
    unique_name,
)
from tests.support.stub import Stub, running_stub


@pytest.fixture(scope="session")
def template_db() -> Iterator[str]:
    """A database with every migration applied, cloned for each test (fast)."""
    name = unique_name("gw_tmpl")

    async def setup() -> None:
        dsn = await create_database(name)
        await migrate(dsn)

    asyncio.run(setup())
    yield name
    asyncio.run(drop_database(name))


@pytest.fixture
async def database_url(template_db: str) -> AsyncIterator[str]:
    """The DSN of a fresh, migrated database of this test's own."""
    name = unique_name("gw_test")
    dsn = await create_database(name, template=template_db)
    yield dsn
    await drop_database(name)


@pytest.fixture
async def empty_database_url() -> AsyncIterator[str]:
    """The DSN of a fresh database with no migrations applied."""
    name = unique_name("gw_empty")
    dsn = await create_database(name)
    yield dsn
    await drop_database(name)


@pytest.fixture
def nats_server() -> Iterator[NatsServer]:
    """A private nats-server with JetStream (file storage, fsync always)."""
    server = NatsServer()
    server.start()
    yield server
    server.cleanup()


@pytest.fixture
def nats_url(nats_server: NatsServer) -> str:
    return nats_server.url


@pytest.fixture
async def stub() -> AsyncIterator[Stub]:
    """The currency-stub, served for real on a free port."""
    async with running_stub() as running:
        yield running


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    """An alert webhook receiver on a free port, recording what it is sent."""
    r = Receiver()
    task = asyncio.create_task(r.server.serve())
    while not r.server.started:
        await asyncio.sleep(0.01)
    yield r
    r.server.should_exit = True
    await task


@pytest.fixture
async def redis_url() -> AsyncIterator[str]:
    """The shared Redis; each test uses keys under its own prefix or flushes what it set."""
    client = aioredis.from_url(REDIS_URL)
    try:
        await client.ping()
    finally:
        await client.aclose()
    yield REDIS_URL


@pytest.fixture(autouse=True)
def whole_statements_afresh() -> None:
    """Each test starts with keyed groups tried as one statement, whatever an earlier
    test's repeats made this process skip (`webhooks.WHOLE_STATEMENTS`)."""
    WHOLE_STATEMENTS.reset()
