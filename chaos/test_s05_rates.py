"""Scenario 5: the rate sources fail one at a time during settlement.

Phase A, Redis down (its proxy disabled): rates come from the currency-service, and
settlement goes on. Phase B, Redis back and the currency-service down (its proxy
disabled): the cached rates, younger than `currency.max_age_s`, are used, and settlement
goes on. Each phase outlasts the worker's 5 s in-process rate memo. Nothing is parked for
want of a rate, and every conversion used the quoted rate.
"""

from __future__ import annotations

import asyncio
from decimal import Decimal
from urllib.parse import urlsplit

import pytest

from chaos.harness import profiles
from chaos.proxy import FaultProxy
from chaos.workload import LoadSpec
from tests.support.settlement import fetch

PROFILE = {
    "fast": {"events": 300, "rate": 80.0, "phase_s": 6.5},
    "full": {"events": 1500, "rate": 100.0, "phase_s": 15.0},
}


async def settled(dsn: str) -> int:
    rows = await fetch(dsn, "SELECT count(*) FROM settlements WHERE state = 'settled'")
    return int(rows[0][0])


@pytest.mark.parametrize("profile", profiles())
async def test_redis_down_then_currency_service_down(
    profile, make_scenario, database_url, nats_node, stub, redis_url
):
    p = PROFILE[profile]
    redis = urlsplit(redis_url)
    redis_proxy = FaultProxy(redis.hostname or "127.0.0.1", redis.port or 6379, name="redis")
    currency_proxy = FaultProxy("127.0.0.1", urlsplit(stub.url).port or 80, name="currency")
    await redis_proxy.start()
    await currency_proxy.start()
    try:
        sc = make_scenario(
            f"s05_rates-{profile}",
            database_url,
            nats_node.url,
            redis={"url": f"redis://127.0.0.1:{redis_proxy.listen_port}/0"},
            currency={"url": f"http://127.0.0.1:{currency_proxy.listen_port}", "max_age_s": 600},
        )
        await sc.open_merchants()
        sc.serve()
        sc.settle()
        await sc.ready("serve")
        gen = sc.load(LoadSpec(events=p["events"], rate_per_s=p["rate"]))
        running = asyncio.create_task(gen.run())
        await gen.reached(0.15)  # warm: the cache holds EUR/USD and GBP/USD

        # A. Redis down: the service answers, settlement goes on.
        await redis_proxy.set_enabled(False)
        asked, count = stub.state.requests, await settled(database_url)
        await asyncio.sleep(p["phase_s"])
        assert stub.state.requests > asked, "no rate was fetched while Redis was down"
        assert await settled(database_url) > count, "settlement stopped while Redis was down"

        # B. Redis back, the currency-service down: the cache serves within its age.
        await redis_proxy.set_enabled(True)
        await currency_proxy.set_enabled(False)
        asked, count = stub.state.requests, await settled(database_url)
        await asyncio.sleep(p["phase_s"])
        assert stub.state.requests == asked
        assert await settled(database_url) > count, "settlement stopped on cached rates"
        await currency_proxy.set_enabled(True)
        record = await running
        result = await sc.finish(record)
    finally:
        await redis_proxy.close()
        await currency_proxy.close()

    assert result.ok, result.table()
    assert result.figures["unexpected_parked"] == 0  # nothing parked for want of a rate
    rates = await fetch(
        database_url, "SELECT DISTINCT currency, rate_at_payment FROM settlements ORDER BY 1"
    )
    quoted = {"EUR": Decimal("1.08"), "GBP": Decimal("1.27"), "USD": Decimal(1)}
    assert {(r[0], Decimal(r[1])) for r in rates} == {(c, quoted[c]) for c, _ in rates}
