"""Scenario 10: a three-node NATS JetStream cluster on loopback, the stream replicated
three times (`[nats] replicas = 3`); the stream's leader is SIGKILLed mid-run and
restarted (in the full variant, then also the node every client dialled first).

Two nodes keep a quorum: a new leader is elected, publishes that failed meanwhile are
re-published by the outbox relay, and the worker's durable consumer carries on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import nats
import pytest

from chaos.failover import stream_times
from chaos.harness import RESULTS_DIR, profiles
from chaos.services import NatsCluster
from chaos.workload import LoadSpec

PROFILE = {
    "fast": {"events": 200, "rate": 100.0, "down_s": 3.0, "seed_node_too": False},
    "full": {"events": 2000, "rate": 120.0, "down_s": 15.0, "seed_node_too": True},
}


@pytest.fixture
def cluster() -> Iterator[NatsCluster]:
    nodes = NatsCluster(3)
    nodes.start()
    yield nodes
    nodes.cleanup()


async def stream_leader(url: str) -> str:
    nc = await nats.connect(url)
    try:
        info = await nc.jetstream().stream_info("WEBHOOKS")
        return str(info.cluster.leader)
    finally:
        await nc.close()


@pytest.mark.parametrize("profile", profiles())
async def test_stream_leader_killed_and_restarted(profile, make_scenario, database_url, cluster):
    p = PROFILE[profile]
    await cluster.wait_ready()
    sc = make_scenario(
        f"s10_nats_cluster-{profile}", database_url, cluster.url, nats={"replicas": 3}
    )
    await sc.open_merchants()
    sc.serve()
    sc.settle()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    running = asyncio.create_task(gen.run())

    await gen.reached(0.35)
    leader = await stream_leader(cluster.url)
    node = next(n for n in cluster.nodes if n.name == leader)
    killed_wall, killed_at = time.time(), gen.elapsed()
    node.kill()
    await asyncio.sleep(p["down_s"])
    node.start()
    if p["seed_node_too"]:
        # Then the node every client dialled first: they must move to the ones they learnt of.
        await gen.reached(0.7)
        cluster.nodes[0].kill()
        await asyncio.sleep(p["down_s"])
        cluster.nodes[0].start()
    record = await running

    result = await sc.finish(record, drain_timeout_s=120)
    # What losing the leader costs: acceptance goes on (the outbox holds the rows), and
    # the stream stores nothing until a new leader is elected.
    stored = await stream_times(cluster.url, record.run)
    resumed = min((t for t in stored.values() if t > killed_wall), default=None)
    refused = sum(1 for a in record.answers if a.at_s >= killed_at and a.status == 503)
    result.figures |= {
        "publish_resumed_s": None if resumed is None else round(resumed - killed_wall, 2),
        "refused_after_kill": refused,
    }
    name = f"s10_nats_cluster-{profile}"
    result.write(RESULTS_DIR / f"{name}.json")
    (RESULTS_DIR / f"{name}.txt").write_text(result.table() + "\n", encoding="utf-8")
    print(f"stream leader lost: publishing resumed after {result.figures['publish_resumed_s']} s")
    print(f"killed the stream leader {leader}; leader after: {await stream_leader(cluster.url)}")
    assert result.ok, result.table()
    assert result.figures["never_2xx"] == 0
    assert result.figures["unexpected_parked"] == 0
