"""Fixtures shared by tests/ and chaos/: per-test databases, NATS, Redis, the stub."""

from __future__ import annotations

import asyncio
import collections
import re
from collections.abc import AsyncIterator, Iterator

import pytest
import redis.asyncio as aioredis

from gateway.adapters.postgres import migrate
from gateway.adapters.postgres.webhooks import WHOLE_STATEMENTS
from tests.support.nats import NatsServer
from tests.support.receiver import Receiver
from tests.support.services import REDIS_URL, create_database, drop_database, unique_name
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


# --- pytest-xdist: which tests start first ---------------------------------------------

#: Units of work that hold several modules, run one after another on one worker: the
#: chaos scenarios (four at once, each a gateway, a worker, a load generator and its
#: faults, starved the timed checks of their own scenario on 2 vCPUs), and the modules that
#: build and run the container images (a session fixture builds them once per worker: on
#: three workers, three times).
_SCENARIO = re.compile(r"chaos/test_s\d+_")
_TOGETHER = {
    "tests/integration/deploy/test_compose.py": "tests/integration/deploy/containers",
    "tests/integration/deploy/test_image.py": "tests/integration/deploy/containers",
    "tests/integration/deploy/test_kube_play.py": "tests/integration/deploy/containers",
}

#: Handed out first under xdist, the long kinds first, so that no worker is left running
#: a long test while the others are idle: the chaos scenarios (`test_sNN_*`), the
#: container images, the benchmarks' self-checks, the rest of chaos/, the browser tests;
#: then the rest in the collection's order, the unit tests (short) last.
_FIRST = (
    _SCENARIO,
    *map(
        re.compile,
        ("tests/integration/deploy/", "tests/integration/test_bench_", "chaos/", "tests/browser/"),
    ),
)


def _rank(item: pytest.Item) -> int:
    nodeid = item.nodeid
    for rank, pattern in enumerate(_FIRST):
        if pattern.match(nodeid):
            return rank
    return len(_FIRST) + (1 if nodeid.startswith("tests/unit/") else 0)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `pytest -n N --dist loadfile` (`make test`) each module is one unit of work
    (its module-scoped fixtures are set up once), and the long ones are handed out first
    (xdist deals the first quarter round-robin, then one unit to whichever worker is
    free). Every worker collects the same order; without xdist nothing changes. A test's
    resources are its worker's own whatever the order: tests/support/services.py (ports,
    the Redis database), the fixtures above (databases, NATS servers), tmp_path."""
    import os

    _unique_node_ids(items)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_rank)  # stable: within a rank, the collection's order


def _unique_node_ids(items: list[pytest.Item]) -> None:
    """schemathesis names each operation's item (`test[POST /v1/events]`) but gives all of
    them the test function's node id, and xdist's schedulers keep their work by node id:
    under `-n N` one operation of each schema ran and the rest were silently dropped (38
    tests). Such items get the node id their name says."""
    counts = collections.Counter(item.nodeid for item in items)
    for item in items:
        if counts[item.nodeid] > 1 and item.parent is not None:
            item._id = item.parent.id.child(item.name)  # as pytest itself builds one


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """`--dist loadfile`, except that the units in `_TOGETHER` hold several modules, and
    the units are handed out in the collection's order (`_rank`): xdist's default puts
    the units with the most tests first, which left the container images and the
    benchmarks' self-checks (few tests, minutes each) to the end of the run."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    config.option.loadscopereorder = False

    class UnitsTogether(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            if _SCENARIO.match(nodeid):
                return "chaos/scenarios"
            for prefix, unit in _TOGETHER.items():
                if nodeid.startswith(prefix):
                    return unit
            return str(super()._split_scope(nodeid))

    return UnitsTogether(config, log)
