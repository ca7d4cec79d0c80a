"""Scenario 4: NATS loses messages it had acknowledged (the stream is purged after the
PubAck, while the settlement worker is down), and `gateway reconcile` repairs it.

Before reconciliation the audit must fail (the fault really lost settlements); after it,
the audit passes: every settling event settled exactly once. Stream presence is not
audited at the end: the purge removed non-settling events on purpose, and reconcile
re-publishes only what settlement needs.
"""

from __future__ import annotations

import asyncio

import nats
import pytest

from chaos.harness import profiles
from chaos.workload import LoadSpec
from gateway import settings as settings_mod
from gateway.wiring.settlement import run_reconcile

PROFILE = {
    "fast": {"events": 200, "rate": 150.0},
    "full": {"events": 2000, "rate": 200.0},
}


async def purge_stream(nats_url: str) -> None:
    nc = await nats.connect(nats_url)
    try:
        await nc.jetstream().purge_stream("WEBHOOKS")
    finally:
        await nc.close()


@pytest.mark.parametrize("profile", profiles())
async def test_stream_loses_acknowledged_messages_and_reconcile_repairs(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    sc = make_scenario(f"s04_nats_loses_acked-{profile}", database_url, nats_node.url)
    await sc.open_merchants()
    sc.serve()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    running = asyncio.create_task(gen.run())

    # 1. Half the load is acknowledged by the stream with no worker running; then lost.
    await gen.reached(0.5)
    await asyncio.sleep(1.5)  # past the inline publisher: those messages had their PubAck
    await purge_stream(nats_node.url)
    sc.settle()
    record = await running

    # 2. The fault is real: without reconciliation, settlements are missing.
    before = await sc.finish(record, drain_timeout_s=3, label="before-reconcile")
    assert not before.ok and before.figures["lost"] > 0, before.table()

    # 3. Reconcile (as `gateway reconcile --older-than-s 2` would) and audit again.
    settings = settings_mod.load(sc.config)
    report = await run_reconcile(settings, older_than_s=2.0)
    assert report.republished > 0 and report.failed == 0
    assert report.republished <= before.figures["settling_2xx"] - before.figures["settled"]
    result = await sc.finish(record, read_stream=False)
    assert result.ok, result.table()
    assert result.figures["unexpected_parked"] == 0
    again = await run_reconcile(settings, older_than_s=0.0)
    assert again.republished == 0 and again.settled == again.scanned
