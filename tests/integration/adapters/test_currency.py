"""Rates end to end: the real currency-stub under uvicorn, a real Redis, the real policy.

`RateSource.decide` never sleeps: the settlement worker retries by redelivery, waiting
each RETRY's delay. `by_schedule` plays that consumer with the delays recorded, not
waited, so the full 1 s / 5 s / 30 s schedule runs in milliseconds against a stub that
really fails.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import redis.asyncio as aioredis

from gateway import cli
from gateway.adapters.currency import CurrencyClient, RateCache, RateSource
from gateway.core.currency import Rate, RateAction, RateOrigin
from gateway.currency_stub import DEFAULT_RATES
from gateway.errors import RateStale, RateUnavailable, UnsupportedPair
from tests.support.services import free_port
from tests.support.stub import Stub, running_stub


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    client = aioredis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def cache(redis_client: aioredis.Redis) -> AsyncIterator[RateCache]:
    """A cache under a key prefix of this test's own, deleted afterwards."""
    prefix = f"test:{uuid.uuid4().hex}:fx"
    yield RateCache(redis_client, key_prefix=prefix)
    keys = [k async for k in redis_client.scan_iter(match=f"{prefix}:*")]
    if keys:
        await redis_client.delete(*keys)


class Sleeps:
    """An injected sleep that records each delay and can act on the world between tries."""

    def __init__(self, on_sleep: Callable[[int], Awaitable[None]] | None = None) -> None:
        self.delays_s: list[float] = []
        self._on_sleep = on_sleep

    async def __call__(self, delay_s: float) -> None:
        self.delays_s.append(delay_s)
        if self._on_sleep is not None:
            await self._on_sleep(len(self.delays_s))


def source(stub: Stub, cache: RateCache, timeout_s: float = 2.0) -> RateSource:
    client = CurrencyClient(stub.http, stub.url, timeout_s=timeout_s)
    return RateSource(client, cache, rand=lambda: 0.5)


async def by_schedule(
    rates: RateSource, base: str, quote: str, sleeps: Sleeps | None = None
) -> Rate:
    """The rate as a redelivering consumer gets it: a RETRY's delay goes to `sleeps` and
    the next try is the next attempt; USE returns the rate; FAIL raises its error."""
    attempt = 1
    while True:
        decision = await rates.decide(base, quote, attempt=attempt)
        if decision.action is RateAction.USE and decision.rate is not None:
            return decision.rate
        if decision.action is RateAction.RETRY and decision.delay_s is not None:
            await (sleeps or Sleeps())(decision.delay_s)
            attempt += 1
            continue
        if decision.error is None:
            raise AssertionError(f"a {decision.action} decision without an error")
        raise decision.error


async def test_fresh_rate_is_used_and_cached(
    stub: Stub, cache: RateCache, redis_client: aioredis.Redis
) -> None:
    """A fresh rate comes from the service and lands in Redis with its as_of."""
    decision = await source(stub, cache).decide("EUR", "USD")
    assert decision.action is RateAction.USE and decision.origin is RateOrigin.SERVICE
    assert decision.rate is not None and decision.rate.rate == Decimal("1.08")
    stored = await redis_client.hgetall(cache.key("EUR", "USD"))
    assert stored[b"rate"] == b"1.08"
    as_of = stored[b"as_of"]
    assert isinstance(as_of, bytes)  # redis types values as bytes | str; no decode_responses
    assert datetime.fromisoformat(as_of.decode()) == decision.rate.as_of
    assert await redis_client.ttl(cache.key("EUR", "USD")) > 0


async def test_service_down_with_valid_cache_uses_it(
    stub: Stub, cache: RateCache, caplog: pytest.LogCaptureFixture
) -> None:
    """Service down and a cached rate younger than max_age_s: the cache serves, with a warning."""
    rates = source(stub, cache)
    first = await by_schedule(rates, "EUR", "USD")
    await stub.control(mode="fail", rates={"EUR/USD": "1.50"})
    with caplog.at_level(logging.WARNING, logger="gateway.adapters.currency"):
        decision = await rates.decide("EUR", "USD")
    assert (decision.action, decision.origin, decision.rate) == (
        RateAction.USE, RateOrigin.CACHE, first,
    )  # fmt: skip
    assert any(
        r.getMessage() == "no fresh rate from the currency-service: using the cached rate"
        and getattr(r, "pair", None) == "EUR/USD"
        and r.levelno == logging.WARNING
        for r in caplog.records
    )


async def test_service_down_and_no_cache_is_rate_unavailable_after_the_schedule(
    stub: Stub, cache: RateCache
) -> None:
    """No cache: tries after 1 s, 5 s, 30 s (jittered), then RATE_UNAVAILABLE."""
    await stub.control(mode="fail")
    sleeps = Sleeps()
    with pytest.raises(RateUnavailable) as caught:
        await by_schedule(source(stub, cache), "EUR", "USD", sleeps)
    assert caught.value.error_class == "RATE_UNAVAILABLE"
    assert sleeps.delays_s == pytest.approx([1.1, 5.5, 33.0])
    assert stub.state.requests == 4


async def test_expired_cache_and_service_down_is_rate_stale(stub: Stub, cache: RateCache) -> None:
    """An expired cached rate is never used: retry for a fresh one, then RATE_STALE."""
    old = Rate("EUR", "USD", Decimal("1.01"), datetime.now(UTC) - timedelta(hours=1))
    await cache.put(old)
    assert await cache.get("EUR", "USD") == old
    await stub.control(mode="fail")
    sleeps = Sleeps()
    with pytest.raises(RateStale):
        await by_schedule(source(stub, cache), "EUR", "USD", sleeps)
    assert len(sleeps.delays_s) == 3


async def test_service_recovering_during_the_schedule_serves_fresh(
    stub: Stub, cache: RateCache
) -> None:
    """If the service comes back between retries, its fresh rate is used."""

    async def recover_after_second_wait(waits: int) -> None:
        if waits == 2:
            await stub.control(mode="ok")

    await stub.control(mode="fail")
    sleeps = Sleeps(recover_after_second_wait)
    rate = await by_schedule(source(stub, cache), "EUR", "USD", sleeps)
    assert rate.rate == Decimal("1.08")
    assert (len(sleeps.delays_s), stub.state.requests) == (2, 3)


async def test_unsupported_pair_fails_at_once(stub: Stub, cache: RateCache) -> None:
    """A 404 is UNSUPPORTED_PAIR on the first try: no waiting, one request."""
    sleeps = Sleeps()
    with pytest.raises(UnsupportedPair):
        await by_schedule(source(stub, cache), "IRR", "XTS", sleeps)
    assert sleeps.delays_s == []
    assert stub.state.requests == 1


async def test_the_corridor_pairs_as_the_service_quotes_them(cache: RateCache) -> None:
    """The stub's own table (the corridors'): USDT/IRR and TRY/USDT quoted, IRR/USDT
    refused at once although its inverse is quoted, as the currency-service does; the
    gateway never inverts a rate the service refuses."""
    async with running_stub(DEFAULT_RATES) as corridors:
        rates = source(corridors, cache)
        assert (await by_schedule(rates, "USDT", "IRR")).rate == Decimal("1049500")
        assert (await by_schedule(rates, "TRY", "USDT")).rate == Decimal("0.02899")
        assert (await by_schedule(rates, "usdt", "usd")).rate == Decimal("0.9998")
        sleeps = Sleeps()
        with pytest.raises(UnsupportedPair):
            await by_schedule(rates, "IRR", "USDT", sleeps)
        assert sleeps.delays_s == []


async def test_redis_down_does_not_stop_settlement(stub: Stub) -> None:
    """With Redis unreachable, rates still come from the service; a cache miss otherwise."""
    dead = aioredis.from_url(f"redis://127.0.0.1:{free_port()}", socket_connect_timeout=0.2)
    try:
        cache = RateCache(dead, key_prefix=f"test:{uuid.uuid4().hex}:fx")
        rate = await by_schedule(source(stub, cache), "GBP", "USD")
        assert rate.rate == Decimal("1.27")
        await stub.control(mode="fail")
        with pytest.raises(RateUnavailable):
            await by_schedule(source(stub, cache), "GBP", "USD")
    finally:
        await dead.aclose()


async def test_stalled_service_times_out_and_the_cache_serves(stub: Stub, cache: RateCache) -> None:
    """A service that stalls past the client's deadline counts as down."""
    rates = source(stub, cache, timeout_s=0.3)
    await by_schedule(rates, "EUR", "USD")
    await stub.control(mode="stall", stall_s=5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    decision = await rates.decide("EUR", "USD")
    assert decision.origin is RateOrigin.CACHE
    assert loop.time() - started < 2.0


async def test_same_currency_needs_no_rate(stub: Stub, cache: RateCache) -> None:
    """USD to USD is rate 1 without asking anyone."""
    decision = await source(stub, cache).decide("USD", "usd")
    assert decision.rate is not None and decision.rate.rate == 1
    assert decision.origin is RateOrigin.IDENTITY
    assert stub.state.requests == 0


async def test_stub_quotes_inverse_pairs_and_validates_control(stub: Stub) -> None:
    """The inverse of a listed pair is quoted; a bad control request is a 400."""
    answer = (await stub.http.get(f"{stub.url}/rates/USD/EUR")).json()
    assert Decimal(answer["rate"]) == pytest.approx(Decimal(1) / Decimal("1.08"))
    assert datetime.fromisoformat(answer["as_of"]).tzinfo is not None
    assert (await stub.control(mode="sideways")).status_code == 400
    assert (await stub.http.get(f"{stub.url}/control")).json()["mode"] == "ok"


def test_cli_parses_rates() -> None:
    """`currency-stub --rate EUR/USD=1.1` parses; a malformed rate is a usage error."""
    parser = cli.build_parser()
    args = parser.parse_args(["currency-stub", "--rate", "eur/usd=1.1", "--port", "9999"])
    assert args.rate == [("EUR/USD", Decimal("1.1"))] and args.port == 9999
    with pytest.raises(SystemExit):
        parser.parse_args(["currency-stub", "--rate", "EURUSD"])
