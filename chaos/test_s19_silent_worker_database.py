"""Scenario 19: one of two `gateway settle` workers loses its database to silence.

`settle-a` reaches PostgreSQL directly, `settle-b` through the fault proxy, with the
shipped `ack_wait_s` and retry delays. In each run the proxy is black-holed (a machine
that vanished: nothing refused, nothing answers), 20 signed Stripe payments are posted
to `gateway serve`, and the run waits until every one is settled, the sick database
still silent; then the proxy passes again and `settle-b` must come back. The figure is
the slowest payment's time from its 200 to its `settled_at` (issue 42 measured 28-63 s
before workers stepped aside; target 5 s), and how many messages `settle-b` handed back.

    .venv/bin/pytest -q -s chaos/test_s19_silent_worker_database.py            # 2 runs
    CHAOS_FULL=1 .venv/bin/pytest -q -s chaos/test_s19_silent_worker_database.py -k full
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
import pytest

from chaos.harness import RESULTS_DIR, merge, profiles
from chaos.procs import GatewayProcess
from chaos.proxy import FaultProxy
from chaos.workload import MERCHANTS, PlannedEvent, _stripe_body, sign

PROFILE = {"fast": {"runs": 2}, "full": {"runs": 6}}
PAYMENTS = 20
#: How long a run may wait for its payments: a bound on the wait, far above the figure.
WAIT_S = 120.0


def through(url: str, proxy: FaultProxy) -> str:
    parts = urlsplit(url)
    user = parts.netloc.rpartition("@")[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{proxy.listen}" if user else proxy.listen))


def payments(run: str) -> list[PlannedEvent]:
    found = []
    for i in range(PAYMENTS):
        event_id, pi = f"evt_s19_{run}_{i}", f"pi_s19_{run}_{i}"
        obj = {
            "id": pi,
            "amount_received": 1000 + i,
            "currency": "usd",
            "metadata": {"merchant_id": MERCHANTS[i % len(MERCHANTS)]},
        }
        body = _stripe_body(event_id, "payment_intent.succeeded", obj)
        found.append(
            PlannedEvent(i, "stripe", event_id, "payment_intent.succeeded", "payment", 1, pi,
                         body=body)
        )  # fmt: skip
    return found


async def settled_at(dsn: str, ids: list[str]) -> dict[str, float]:
    conn = await asyncpg.connect(dsn)
    try:
        rows = await conn.fetch(
            "SELECT settlement_id, extract(epoch FROM settled_at) AS at FROM settlements"
            " WHERE state = 'settled' AND settlement_id = ANY($1)",
            ids,
        )
    finally:
        await conn.close()
    return {r["settlement_id"]: float(r["at"]) for r in rows}


def said(worker: GatewayProcess, msg: str) -> list[dict[str, object]]:
    return [line for line in worker.log_lines() if line.get("msg") == msg]


async def until_said(worker: GatewayProcess, msg: str, count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while True:
        if len(said(worker, msg)) >= count:
            return
        assert worker.alive and time.monotonic() < deadline, f"{worker.name}: no {msg!r}"
        await asyncio.sleep(0.1)


async def one_run(url: str, dsn: str, proxy: FaultProxy, run: str) -> dict[str, float]:
    """Black-hole the sick worker's database, post the payments, wait for all of them
    (the database still silent), restore it; the run's figures."""
    planned = payments(run)
    await proxy.set_blackhole(True)
    answered: dict[str, float] = {}
    async with httpx.AsyncClient(base_url=url, timeout=10) as http:

        async def post(p: PlannedEvent) -> None:
            answer = await http.post("/webhooks/stripe", content=p.body, headers=sign(p))
            assert answer.status_code == 200, answer.text
            answered[p.settlement_id or ""] = time.time()

        await asyncio.gather(*(post(p) for p in planned))
    deadline = time.monotonic() + WAIT_S
    while len(done := await settled_at(dsn, list(answered))) < PAYMENTS:
        assert time.monotonic() < deadline, f"{len(done)} of {PAYMENTS} settled"
        await asyncio.sleep(0.1)
    assert proxy.blackhole, "every payment settled while the sick database was silent"
    await proxy.set_blackhole(False)
    took = [done[pi] - answered[pi] for pi in answered]
    return {"slowest_s": max(took), "median_s": sorted(took)[len(took) // 2]}


@pytest.mark.parametrize("profile", profiles())
async def test_a_worker_on_a_silent_database_steps_aside(
    profile, make_scenario, database_url, nats_node
):
    name = f"s19_silent_worker_database-{profile}"
    shipped = {"ack_wait_s": 30.0, "retry_delays_s": [5.0, 30.0, 120.0], "batch_size": 512}
    sc = make_scenario(name, database_url, nats_node.url, settlement=shipped)
    host = urlsplit(database_url)
    proxy = FaultProxy(host.hostname or "127.0.0.1", host.port or 5432, name="pg-settle-b")
    await proxy.start()
    try:
        sick_cfg = sc.write_config(
            "settle-b", merge(sc.doc, database={"url": through(database_url, proxy)})
        )
        await sc.open_merchants()
        sc.serve()
        healthy, sick = sc.settle("settle-a"), sc.settle("settle-b", sick_cfg)
        await sc.ready("serve")
        for worker in (healthy, sick):
            while not said(worker, "settlement worker started"):
                assert worker.alive, f"{worker.name} exited; see {worker.log_path}"
                await asyncio.sleep(0.1)
        runs = []
        for i in range(PROFILE[profile]["runs"]):
            asides = len(said(sick, "database not answering; stepping aside"))
            backs = len(said(sick, "database answers again; fetching again"))
            figures = await one_run(sc.url(), database_url, proxy, f"{uuid.uuid4().hex[:6]}{i}")
            # Back before the next run, so it can be sick again.
            await until_said(sick, "database answers again; fetching again", backs + 1)
            stepped = said(sick, "database not answering; stepping aside")[asides:]
            figures["handed_back"] = sum(int(str(s.get("handed_back", 0))) for s in stepped)
            runs.append(figures)
            print(f"{name} run {i}: {figures}", flush=True)
        assert healthy.alive and sick.alive
    finally:
        await proxy.close()
    result = {
        "scenario": name,
        "payments": PAYMENTS,
        "runs": runs,
        "slowest_s": max(r["slowest_s"] for r in runs),
    }
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(f"{name}: slowest of {PAYMENTS} payments over {len(runs)} runs: "
          f"{result['slowest_s']:.2f} s", flush=True)  # fmt: skip
