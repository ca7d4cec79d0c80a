"""Scenario 6: the currency-service and the ledger connection get 2 s of latency, then
their connections are reset (TCP RST) — driven over the Toxiproxy-style HTTP API.

The ledger connection is the settlement worker's PostgreSQL pool (the embedded ledger
shares it), so a reset can land between a COMMIT and its answer: the transfer is posted
and the worker does not know. Retries must follow the error policy's schedules, and the
ledger's idempotent transfer ids must keep every settlement to one transfer.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pytest

from chaos.api import ToxiproxyClient, serving
from chaos.harness import profiles
from chaos.retries import check_schedule
from chaos.workload import LoadSpec

# The load outlasts the faults (fast: 18 s of sending against 4 s of latency and 5 s of
# resets from 15 % in), so the workers are settling while connections are cut. With a
# load that ended first, the backlog was settled before the first reset and a run could
# feel no fault at all.
PROFILE = {
    "fast": {"events": 900, "rate": 50.0, "latency_s": 4.0, "resets": 2},
    "full": {"events": 2400, "rate": 60.0, "latency_s": 20.0, "resets": 5},
}


#: The longest the first burst of resets waits for the worker to feel one.
FIRST_BURST_MAX_S = 15.0
#: The ordering gate's line for a batch whose keys' positions could not be read, and the
#: worker's when it steps aside from a database that does not answer.
_FELT_LINES = frozenset(
    {
        "could not read the keys' positions; the batch is put back",
        "database not answering; stepping aside",
    }
)


def port_of(listen: str) -> int:
    return int(listen.rpartition(":")[2])


@pytest.mark.parametrize("profile", profiles())
async def test_latency_and_resets_on_currency_and_ledger(
    profile, make_scenario, database_url, nats_node, stub
):
    p = PROFILE[profile]
    db = urlsplit(database_url)
    async with serving() as (api_url, _):
        api = ToxiproxyClient(api_url)
        ledger = await api.create_proxy("ledger", f"127.0.0.1:{db.port}")
        currency = await api.create_proxy("currency", f"127.0.0.1:{urlsplit(stub.url).port}")
        sc = make_scenario(f"s06_slow_and_reset-{profile}", database_url, nats_node.url)
        worker_doc = {
            **sc.doc,
            "database": {
                "url": database_url.replace(db.netloc, f"{db.username}@{ledger['listen']}")
            },
            "currency": {**sc.doc["currency"], "url": f"http://{currency['listen']}"},
        }
        await sc.open_merchants()
        sc.serve()
        worker = sc.settle(config=sc.write_config("settle", worker_doc))
        await sc.ready("serve")
        gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
        running = asyncio.create_task(gen.run())
        await gen.reached(0.15)

        # 1. Two seconds of latency on every answer from both.
        for name in ("ledger", "currency"):
            await api.add_toxic(name, "latency", "downstream", latency=2000, jitter=100)
        await asyncio.sleep(p["latency_s"])
        for name in ("ledger", "currency"):
            await api.remove_toxic(name, "latency_downstream")
        # 2. Bursts of resets: every connection is cut on its next answer in the first,
        # half of them in the others. (Half in every burst left a run with two or three
        # connections open a one-in-sixteen chance of cutting none, and of feeling no
        # fault at all.) The first burst lasts until the worker has felt a cut, up to
        # `FIRST_BURST_MAX_S`: a burst of a fixed 1.5 s could land while the worker had
        # nothing in flight, and the run then felt no fault at all.
        for burst in range(p["resets"]):
            toxicity = 1.0 if burst == 0 else 0.5
            for name in ("ledger", "currency"):
                await api.add_toxic(name, "reset_peer", "downstream", toxicity=toxicity, timeout=0)
            await asyncio.sleep(1.5)
            if burst == 0:
                await _until_felt(worker, worker_doc, FIRST_BURST_MAX_S)
            for name in ("ledger", "currency"):
                await api.remove_toxic(name, "reset_peer_downstream")
            await asyncio.sleep(1.0)
        record = await running
        result = await sc.finish(record, drain_timeout_s=120)
        await api.aclose()

    assert result.ok, result.table()
    assert result.figures["unexpected_parked"] == 0
    lines = worker.log_lines()
    schedule = check_schedule(lines, worker_doc)
    assert not schedule.violations, schedule.violations[:10]
    # The faults were felt: connections failed and were retried, as a settlement's retry,
    # as a batch the ordering gate put back when it could not read its keys, or as the
    # worker stepping aside from a database that did not answer.
    assert _felt(lines, worker_doc) > 0, schedule.retries


def _felt(lines: list[dict[str, Any]], doc: dict[str, Any]) -> int:
    """Faults the worker felt: settlements retried for a fault (not for a payment that
    has not settled yet), batches the ordering gate put back, and the times it stepped
    aside from a database that did not answer in time (the latency's 2 s is past its
    liveness deadline: it hands its messages back and stops fetching until the
    database answers again, which can outlast every burst of resets)."""
    retries = check_schedule(lines, doc).retries
    faults = sum(n for c, n in retries.items() if c != "PAYMENT_NOT_SETTLED")
    return faults + sum(line.get("msg") in _FELT_LINES for line in lines)


async def _until_felt(worker: Any, doc: dict[str, Any], most_s: float) -> None:
    """Return once the worker's log shows a fault felt, or after `most_s`."""
    deadline = asyncio.get_running_loop().time() + most_s
    while asyncio.get_running_loop().time() < deadline:
        if _felt(worker.log_lines(), doc) > 0:
            return
        await asyncio.sleep(0.2)
