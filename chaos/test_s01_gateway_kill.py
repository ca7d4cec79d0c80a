"""Scenario 1: `gateway serve` is SIGKILLed mid-load and restarted.

Requests in flight at the kill get no answer and are retried by the provider; rows
committed but not yet published are published by the restarted process's relay.
"""

from __future__ import annotations

import asyncio

import pytest

from chaos.harness import profiles
from chaos.workload import LoadSpec

PROFILE = {
    "fast": {"events": 200, "rate": 120.0, "down_s": 1.0},
    "full": {"events": 2000, "rate": 200.0, "down_s": 5.0},
}


@pytest.mark.parametrize("profile", profiles())
async def test_gateway_sigkill_mid_load_then_restart(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    sc = make_scenario(f"s01_gateway_kill-{profile}", database_url, nats_node.url)
    await sc.open_merchants()
    serve = sc.serve()
    sc.settle()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    running = asyncio.create_task(gen.run())

    await gen.reached(0.4)
    serve.kill()
    await asyncio.sleep(p["down_s"])
    serve.start()
    record = await running

    result = await sc.finish(record)
    assert result.ok, result.table()
    assert result.figures["rejected"].get("no_answer", 0) > 0, "the kill was not felt"
    assert result.figures["never_2xx"] == 0
    assert result.figures["unexpected_parked"] == 0
