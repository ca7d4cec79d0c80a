"""Scenario 11: poison mixed into a steady signed load (chaos/poison.py lists each kind).

The audit must show lost = 0, doubled = 0 and no phantom for the genuine load; every
poison delivery gets its documented answer; no forged row exists; the outbox drains.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from chaos.harness import profiles
from chaos.poison import MARKER, Poisoner, github_config
from chaos.workload import LoadSpec, providers_config
from tests.support.settlement import fetch

PROFILE = {
    "fast": {"events": 240, "rate": 80.0, "rounds": 4, "forged": 20, "idle": 200},
    "full": {"events": 1500, "rate": 100.0, "rounds": 20, "forged": 50, "idle": 500},
}
MAX_BODY_BYTES = 65_536
MAX_HEAD_BYTES = 32_768
HEAD_TIMEOUT_S = 2.0


@pytest.mark.parametrize("profile", profiles())
async def test_poison_never_stops_the_pipeline(profile, make_scenario, database_url, nats_node):
    p = PROFILE[profile]
    sc = make_scenario(
        f"s11_poison-{profile}",
        database_url,
        nats_node.url,
        http={
            "max_body_bytes": MAX_BODY_BYTES,
            "max_header_bytes": MAX_HEAD_BYTES,
            "header_timeout_s": HEAD_TIMEOUT_S,
        },
        providers={**providers_config(), "github": github_config()},
    )
    await sc.open_merchants()
    sc.serve()
    sc.settle()
    await sc.ready("serve")
    gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
    poison = Poisoner(
        sc.url(), gen.record.run, max_body_bytes=MAX_BODY_BYTES, head_bytes=MAX_HEAD_BYTES
    )
    running = asyncio.create_task(gen.run())
    idle = asyncio.create_task(poison.hold_idle(p["idle"], HEAD_TIMEOUT_S + 6.0))
    async with httpx.AsyncClient(timeout=15.0) as http:
        await poison.replays(http, p["forged"])
        for i in range(p["rounds"]):
            await gen.reached((i + 1) / (p["rounds"] + 1))
            await poison.round(http, i)
    await idle
    record = await running

    result = await sc.finish(record)
    print(poison.record.summary())
    assert result.ok, result.table()
    assert result.figures["never_2xx"] == 0 and result.figures["unexpected_parked"] == 0
    got = poison.record.statuses
    rounds = p["rounds"]
    assert got["oversized"] == {413: rounds}
    assert got["nul_type"] == {200: rounds} and got["unparseable"] == {200: rounds}
    assert set(got["header_flood"]) <= {431, 0} and got["header_flood"].total() == rounds
    assert got["replay_genuine"] == {200: 1} and got["replay"] == {200: p["forged"]}
    assert poison.record.outcomes["replay"] == {"duplicate": p["forged"]}
    assert poison.record.idle_closed == poison.record.idle_sent > 0

    run = gen.record.run
    rows = await fetch(
        database_url,
        "SELECT provider, count(*) FROM processed_webhooks "
        "WHERE position($1::bytea IN body) > 0 AND position($2::bytea IN body) > 0 "
        "GROUP BY provider ORDER BY provider",
        MARKER.encode(),
        run.encode(),
    )
    # NUL types and unparseable bodies are kept (Stripe), one GitHub row; none oversized.
    assert dict(rows) == {"github": 1, "stripe": 2 * rounds}, rows
    parked = await fetch(
        database_url,
        "SELECT error_class, count(*) FROM dlq_webhooks WHERE stage = 'ingest' "
        "AND position($1::bytea IN payload) > 0 AND position($2::bytea IN payload) > 0 "
        "GROUP BY error_class ORDER BY error_class",
        MARKER.encode(),
        run.encode(),
    )
    assert dict(parked) == {"EVENT_TYPE_INVALID": rounds, "PAYLOAD_NOT_JSON": rounds}, parked
    pending = await fetch(
        database_url,
        "SELECT count(*) FROM processed_webhooks WHERE outbox_holds(processed_webhooks) "
        "AND subject IS NOT NULL AND publish_parked_at IS NULL",
    )
    assert pending[0][0] == 0, "the outbox did not drain"
