"""Scenario 7: the settlement worker is SIGKILLed mid-batch and restarted.

The kill comes while settlements are in flight (amount and rate fixed, transfer not yet
confirmed). Messages fetched but not acknowledged are redelivered after `ack_wait_s`;
one posted to the ledger but not acknowledged is posted again under the same transfer
id, which the ledger answers with "exists": nothing is lost and nothing doubles.
"""

from __future__ import annotations

import asyncio
import time

import asyncpg
import pytest

from chaos.harness import profiles
from chaos.workload import LoadSpec

PROFILE = {
    "fast": {"events": 250, "rate": 0.0, "kills": 1},
    "full": {"events": 2000, "rate": 150.0, "kills": 3},
}
_COUNTS = """
SELECT count(*) FILTER (WHERE state = 'settled') AS settled,
       count(*) FILTER (WHERE state = 'pending') AS pending
FROM settlements
"""


async def kill_mid_batch(conn: asyncpg.Connection, worker, at_least: int) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """SIGKILL the worker once `at_least` settled and some are in flight; the counts then."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        row = await conn.fetchrow(_COUNTS)
        if row["settled"] >= at_least and row["pending"] > 0:
            worker.kill()
            return int(row["settled"]), int(row["pending"])
        await asyncio.sleep(0.005)
    raise AssertionError("never caught the worker with settlements in flight")


@pytest.mark.parametrize("profile", profiles())
async def test_worker_sigkill_mid_batch_then_restart(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    sc = make_scenario(
        f"s07_worker_kill-{profile}",
        database_url,
        nats_node.url,
        settlement={"ack_wait_s": 3.0, "batch_size": 128},
    )
    await sc.open_merchants()
    sc.serve()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    running = asyncio.create_task(gen.run())
    await gen.reached(0.5)  # a backlog waits in the stream: the worker starts on full batches
    worker = sc.settle()
    conn = await asyncpg.connect(database_url)
    kills = []
    try:
        for k in range(p["kills"]):
            kills.append(await kill_mid_batch(conn, worker, 20 + k * p["events"] // 8))
            await asyncio.sleep(0.5)
            worker.start()
    finally:
        await conn.close()
    record = await running

    result = await sc.finish(record)
    print(f"(settled, in flight) at each kill: {kills}")
    assert result.ok, result.table()
    assert worker.starts == p["kills"] + 1
    assert result.figures["unexpected_parked"] == 0
