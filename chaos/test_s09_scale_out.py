"""Scenario 9: scale-out — two `gateway serve`, two `gateway relay` and two `gateway settle`
against one database and one stream; one of each is SIGKILLed mid-run and stays down.

The provider's retries move to the surviving server, the surviving relay publishes what
the dead server committed, and the surviving worker gets the dead one's unacknowledged
messages after `ack_wait_s`.
"""

from __future__ import annotations

import asyncio

import pytest

from chaos.harness import profiles
from chaos.workload import LoadSpec

PROFILE = {
    "fast": {"events": 200, "rate": 120.0},
    "full": {"events": 2500, "rate": 250.0},
}


@pytest.mark.parametrize("profile", profiles())
async def test_two_of_each_one_of_each_killed(profile, make_scenario, database_url, nats_node):
    p = PROFILE[profile]
    sc = make_scenario(
        f"s09_scale_out-{profile}", database_url, nats_node.url, settlement={"ack_wait_s": 3.0}
    )
    await sc.open_merchants()
    serves = [sc.serve("serve-a"), sc.serve("serve-b")]
    relays = [sc.relay("relay-a"), sc.relay("relay-b")]
    workers = [sc.settle("settle-a"), sc.settle("settle-b")]
    await sc.ready("serve-a", "serve-b")
    gen = sc.load(
        LoadSpec(events=p["events"], rate_per_s=p["rate"]), [sc.url("serve-a"), sc.url("serve-b")]
    )
    running = asyncio.create_task(gen.run())

    await gen.reached(0.4)
    for group in (serves, relays, workers):
        group[0].kill()
    record = await running

    result = await sc.finish(record)
    assert result.ok, result.table()
    assert [p.alive for p in (*serves, *relays, *workers)] == [False, True] * 3
    assert result.figures["rejected"].get("no_answer", 0) > 0, "the serve kill was not felt"
    assert result.figures["never_2xx"] == 0
    assert result.figures["unexpected_parked"] == 0
