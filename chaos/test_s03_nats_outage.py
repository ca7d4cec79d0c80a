"""Scenario 3: the NATS server is SIGKILLed for a while (20 s in the full variant) and
restarted on the same store.

Acceptance carries on throughout (the row is the outbox, and NATS is off the request
path); when NATS is back the outbox drains and the worker settles everything.
"""

from __future__ import annotations

import asyncio

import pytest

from chaos.harness import profiles
from chaos.workload import LoadSpec

PROFILE = {
    "fast": {"events": 200, "rate": 80.0, "down_s": 4.0},
    "full": {"events": 1500, "rate": 100.0, "down_s": 20.0},
}


@pytest.mark.parametrize("profile", profiles())
async def test_nats_outage_acceptance_continues_and_outbox_drains(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    sc = make_scenario(f"s03_nats_outage-{profile}", database_url, nats_node.url)
    await sc.open_merchants()
    sc.serve()
    sc.settle()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    running = asyncio.create_task(gen.run())

    await gen.reached(0.25)
    nats_node.kill()
    down_at = gen.elapsed()
    await asyncio.sleep(p["down_s"])
    nats_node.start()
    up_at = gen.elapsed()
    record = await running

    result = await sc.finish(record)
    assert result.ok, result.table()
    during = [a for a in record.answers if down_at < a.at_s < up_at]
    assert len(during) > p["rate"] * p["down_s"] / 2, "the outage saw too little load"
    assert {a.status for a in during} <= {200, 401}, "acceptance stopped while NATS was down"
    assert result.figures["never_2xx"] == 0
    assert result.figures["unexpected_parked"] == 0
