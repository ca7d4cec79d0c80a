"""The durability check on a primary whose `synchronous_standby_names = '*'` makes a
logical replication subscriber (a change-data-capture consumer on a cluster of its own)
its synchronous walsender. PostgreSQL's commits then wait for the subscriber, but no
physical standby a failover could promote has to have them: `at_risk`, whether or not
an asynchronous physical standby streams too, and a required start is refused."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest

from gateway.adapters.postgres import open_pool
from gateway.adapters.postgres.durability import read_durability
from gateway.core.health.durability import DurabilityState
from gateway.errors import DatabaseNotDurable
from gateway.metrics import Metrics
from gateway.wiring.durability import DurabilityWatcher
from tests.support.pg_pair import PgCluster, PgPair
from tests.support.services import wait_until

pytestmark = pytest.mark.slow

S = DurabilityState
SUBSCRIPTION = "cdc"  # also the subscriber's application_name on the primary
AT_RISK_REASON = (
    "synchronous_standby_names (FIRST 1 of any) is met by logical replication subscribers "
    "(1 streaming as synchronous), which a failover cannot promote: a commit can be "
    "acknowledged before any physical standby has it, so a failover can lose events the "
    "gateway acknowledged"
)


class Published:
    """A primary (of a pair whose standby is not started yet) publishing table `t` of its
    database to a subscriber cluster, `synchronous_standby_names = '*'` on the primary."""

    def __init__(self) -> None:
        self.pair = PgPair(synchronous=False)  # the names are set here, to '*'
        self.pair.primary.settings["wal_level"] = "logical"
        self.subscriber = PgCluster()

    async def start(self) -> None:
        await asyncio.to_thread(self.pair.start_primary)
        await self.pair.create_database()
        await asyncio.to_thread(self.subscriber.init)
        await asyncio.to_thread(self.subscriber.start)
        await execute(self.pair.primary_dsn, "CREATE TABLE t (x int PRIMARY KEY)")
        await execute(self.pair.primary_dsn, "CREATE PUBLICATION p FOR TABLE t")
        await execute(self.subscriber.dsn(), "CREATE TABLE t (x int PRIMARY KEY)")
        source = f"host=127.0.0.1 port={self.pair.primary.port} user=postgres dbname=chaos"
        subscribe = f"CREATE SUBSCRIPTION {SUBSCRIPTION} CONNECTION '{source}' PUBLICATION p"
        await execute(self.subscriber.dsn(), subscribe)
        # The initial copy done, no table-sync walsender comes and goes during a reading.
        await wait_until(self._copied, timeout_s=30)
        # Only now: while the subscription is being made, commits would wait for it.
        await execute(self.pair.primary_dsn, "ALTER SYSTEM SET synchronous_standby_names = '*'")
        await execute(self.pair.primary_dsn, "SELECT pg_reload_conf()")
        await self.wait_replication({SUBSCRIPTION: "sync"})

    async def _copied(self) -> bool:
        (row,) = await self.subscriber.fetch(
            "SELECT count(*) FILTER (WHERE srsubstate <> 'r') AS left,"
            " count(*) AS tables FROM pg_subscription_rel"
        )
        return bool(row["tables"] == 1 and row["left"] == 0)

    async def wait_replication(self, want: dict[str, str]) -> None:
        """Until each named walsender streams in the given `sync_state`."""

        async def reached() -> bool:
            rows = await self.pair.primary.fetch(
                "SELECT application_name, sync_state FROM pg_stat_replication"
                " WHERE state = 'streaming'"
            )
            return {r["application_name"]: r["sync_state"] for r in rows} == want

        await wait_until(reached, timeout_s=30, interval_s=0.1)

    async def cleanup(self) -> None:
        await asyncio.to_thread(self.subscriber.cleanup)
        await asyncio.to_thread(self.pair.cleanup)


@pytest.fixture
async def published() -> AsyncIterator[Published]:
    setup = Published()
    try:
        await setup.start()
        # The gateway's role as deployed: pg_monitor, not a superuser.
        await execute(setup.pair.primary_dsn, "CREATE ROLE gateway_app LOGIN")
        await execute(setup.pair.primary_dsn, "GRANT pg_monitor TO gateway_app")
        yield setup
    finally:
        await setup.cleanup()


def gateway_dsn(setup: Published) -> str:
    return setup.pair.primary_dsn.replace("postgres@", "gateway_app@")


async def test_a_logical_subscriber_alone_is_at_risk(published: Published) -> None:
    """No physical standby at all. Not `waiting_for_standby`: commits do not wait for a
    standby to connect, they are acknowledged once the subscriber has them (one commits
    here and arrives there). The question the state answers is whether promoting a
    standby could lose an acknowledged event, and a subscriber is no copy to promote:
    `at_risk`. A process that requires a synchronous standby is refused."""
    await asyncio.wait_for(execute(published.pair.primary_dsn, "INSERT INTO t VALUES (1)"), 10)
    await wait_until(lambda: published.subscriber.fetch("SELECT x FROM t"), timeout_s=10)
    async with open_pool(gateway_dsn(published), max_size=2) as pool:
        got = await read_durability(pool)
        watcher = DurabilityWatcher(lambda: read_durability(pool), Metrics(), required=True)
        with pytest.raises(DatabaseNotDurable) as refused:
            await watcher.check_at_start()
    assert (got.state, got.synchronous_standbys, got.reason) == (S.AT_RISK, 0, AT_RISK_REASON)
    assert refused.value.state == "at_risk"


async def test_a_subscriber_in_sync_with_an_asynchronous_standby_is_at_risk(
    published: Published,
) -> None:
    """A physical standby streams too, but the subscriber (first to connect) holds the
    one synchronous place and the standby is `potential`: commits do not wait for it."""
    await asyncio.to_thread(published.pair.start_standby)
    await published.wait_replication({SUBSCRIPTION: "sync", "standby1": "potential"})
    async with open_pool(gateway_dsn(published), max_size=2) as pool:
        got = await read_durability(pool)
    assert (got.state, got.synchronous_standbys, got.reason) == (S.AT_RISK, 0, AT_RISK_REASON)


async def execute(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()
