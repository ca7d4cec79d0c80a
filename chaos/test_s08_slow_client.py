"""Scenario 8: slow clients — a `slicer` on the client side trickles each request (headers,
then a ~4 KB body) over 60 s (10 s in the fast variant).

The gateway refuses each with 400 once `http.request_timeout_s` passes while it waits
for the body, records nothing for it, and answers everyone else as usual meanwhile.

"As usual" is the same load's answers without the slow clients, sent first in the same
run: the others' answer times are judged against that baseline, not against a fixed
number of seconds, so a machine busy with other work slows both alike. A gateway that
made the others wait for a slow client would add up to its `request_timeout_s` to them:
their p99 may be at most half of it above the baseline's, their longest answer at most
all of it.
"""

from __future__ import annotations

import asyncio
import time
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from bench.e2e_figures import percentile
from chaos.harness import profiles
from chaos.loadgen import LoadRecord
from chaos.proxy import FaultProxy
from chaos.workload import LoadSpec, PlannedEvent, sign
from tests.support.settlement import fetch

PROFILE = {
    "fast": {"events": 150, "rate": 50.0, "trickle_s": 10.0, "timeout_s": 2.0, "clients": 8},
    "full": {"events": 1000, "rate": 60.0, "trickle_s": 60.0, "timeout_s": 10.0, "clients": 20},
}
SLICE_BYTES = 64


def slow_event(i: int) -> PlannedEvent:
    obj = {
        "id": f"pi_slow_{i}",
        "amount_received": 100,
        "currency": "usd",
        "metadata": {"merchant_id": "m_chaos_0", "note": "x" * 4000},
    }
    body = orjson.dumps(
        {"id": f"evt_slow_{i}", "type": "payment_intent.succeeded", "data": {"object": obj}}
    )
    return PlannedEvent(
        i, "stripe", f"evt_slow_{i}", "payment_intent.succeeded", "payment", 1, body=body
    )


async def post_slowly(url: str, event: PlannedEvent, patience_s: float) -> tuple[int, dict, float]:  # type: ignore[type-arg]
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=patience_s) as http:
        response = await http.post(
            f"{url}/webhooks/stripe", content=event.body, headers=sign(event)
        )
    return response.status_code, response.json(), time.monotonic() - started


# Its baseline and its measured run are a minute apart: beside other workers, whose load
# changes from one minute to the next, the two would not see the same machine.
@pytest.mark.alone
@pytest.mark.parametrize("profile", profiles())
async def test_slow_clients_time_out_and_others_are_unaffected(
    profile, make_scenario, database_url, nats_node
):
    p = PROFILE[profile]
    sc = make_scenario(
        f"s08_slow_client-{profile}",
        database_url,
        nats_node.url,
        http={"request_timeout_s": p["timeout_s"]},
    )
    await sc.open_merchants()
    sc.serve()
    sc.settle()
    await sc.ready("serve")
    # The baseline: the same load (other event ids) with no slow client connected.
    usual = await sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"], seed=2)).run()
    await sc.drain(usual)  # settled before the measured run, which it would otherwise share
    slicer = FaultProxy("127.0.0.1", urlsplit(sc.url()).port or 0, name="slow-clients")
    await slicer.start()
    events = [slow_event(i) for i in range(p["clients"])]
    request_bytes = len(events[0].body) + 400  # the body and about as much in headers
    delay_us = p["trickle_s"] / (request_bytes / SLICE_BYTES) * 1_000_000
    slicer.add_toxic(
        "slicer", "upstream", average_size=SLICE_BYTES, size_variation=16, delay=delay_us
    )
    try:
        slow = asyncio.gather(
            *(post_slowly(f"http://{slicer.listen}", e, p["trickle_s"] + 30) for e in events)
        )
        record = await sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"])).run()
        answers = await slow
    finally:
        await slicer.close()

    result = await sc.finish(record)
    print(
        f"slow clients answered {sorted({a[0] for a in answers})} after "
        f"{min(a[2] for a in answers):.1f}-{max(a[2] for a in answers):.1f} s"
    )
    assert result.ok, result.table()
    for status, doc, elapsed_s in answers:
        assert status == 400 and doc["detail"] == "request body not received in time", doc
        assert p["timeout_s"] <= elapsed_s < p["trickle_s"], elapsed_s
    stored = await fetch(
        database_url, "SELECT count(*) FROM processed_webhooks WHERE event_id LIKE 'evt_slow_%'"
    )
    assert stored[0][0] == 0, "a refused slow request was recorded"
    assert result.figures["never_2xx"] == 0 and set(result.figures["rejected"]) <= {"401"}
    took, usual_took = answer_times_s(record), answer_times_s(usual)
    print(f"others' p99/max {took[0.99]:.3f}/{took[1.0]:.3f} s", end=", ")
    print(f"without slow clients {usual_took[0.99]:.3f}/{usual_took[1.0]:.3f} s")
    assert took[0.99] < usual_took[0.99] + p["timeout_s"] / 2, "others were slowed down"
    # One answer is one sample: on a machine busy with other work it strays further
    # than the p99 does. Past the whole timeout, it waited for a slow client.
    assert took[1.0] < usual_took[1.0] + p["timeout_s"], (
        "one of the others waited for a slow client"
    )


def answer_times_s(record: LoadRecord) -> dict[float, float]:
    """The p99 (nearest rank) and the longest of a run's 2xx answer times, in seconds."""
    took = [a.took_s for a in record.answers if 200 <= a.status < 300]
    p99, longest = percentile(took, 99), percentile(took, 100)
    assert p99 is not None and longest is not None, "no 2xx answer at all"
    return {0.99: p99, 1.0: longest}
