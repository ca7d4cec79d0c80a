"""Fixtures for the chaos scenarios, and the fast/full split.

Every scenario runs in a fast variant (small load, short faults) inside `make test`; its
full variant (the issue's durations and a larger load) is marked `chaos_full` and runs
only with CHAOS_FULL=1 (`make chaos`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from chaos.failover import Topology, migrated_pair
from chaos.harness import FULL, Scenario, base_doc, merge
from chaos.services import PgCluster
from gateway.adapters.postgres import migrate
from tests.support.nats import NatsServer
from tests.support.stub import Stub


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "chaos_full: a long chaos variant; runs only with CHAOS_FULL=1 (make chaos)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if FULL:
        return
    skip = pytest.mark.skip(reason="long chaos variant: set CHAOS_FULL=1 (make chaos)")
    for item in items:
        if "chaos_full" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def nats_node() -> Iterator[NatsServer]:
    """A private nats-server the scenario may kill and restart."""
    node = NatsServer(name="n1")
    node.start()
    yield node
    node.cleanup()


@pytest.fixture
async def pg_cluster() -> AsyncIterator[tuple[PgCluster, str]]:
    """A private PostgreSQL cluster (to crash) with a migrated database."""
    cluster = PgCluster()
    await asyncio.to_thread(cluster.init)
    await asyncio.to_thread(cluster.start)
    try:
        dsn = await cluster.create_database("chaos")
        await migrate(dsn)
        yield cluster, dsn
    finally:
        await asyncio.to_thread(cluster.cleanup)


@pytest.fixture
async def pg_failover(request: pytest.FixtureRequest) -> AsyncIterator[Topology]:
    """A private primary and streaming standby, migrated, behind fault proxies (chaos.
    failover.Topology): parametrize it indirectly with "sync" (a synchronous standby)
    or "async"."""
    async with migrated_pair(synchronous=request.param == "sync") as topology:
        yield topology


@pytest.fixture
def make_scenario(
    request: pytest.FixtureRequest, tmp_path: Path, stub: Stub, redis_url: str
) -> object:
    """`make_scenario(name, database_url, nats_url, **sections)` → a `Scenario`.

    Its processes are stopped when the test ends, before any fixture (the database, NATS)
    is torn down: a finalizer added during the test runs first.
    """

    def make(
        name: str,
        database_url: str,
        nats_url: str,
        *,
        audit_nats_url: str | None = None,
        **sections: dict[str, object],
    ) -> Scenario:
        doc = merge(base_doc(database_url, nats_url, redis_url, stub.url), **sections)
        workdir = tmp_path / name
        workdir.mkdir()
        scenario = Scenario(
            name, workdir, doc, database_url=database_url, nats_url=audit_nats_url or nats_url
        )
        request.node.addfinalizer(scenario.close)
        return scenario

    return make
