"""Exchange rates: the currency-service over HTTP, the Redis rate cache, and `RateSource`.

Errors are translated here, at the edge: connection errors, timeouts, 5xx and unreadable
bodies are `RateServiceUnavailable` (transient); 404 is `UnsupportedPair` (permanent).
Redis is a fallback, never a dependency: any Redis failure is logged and read as a miss,
so settlement goes on while the currency-service answers.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx
import redis.asyncio as aioredis
import redis.exceptions

from gateway.core.currency import (
    DEFAULT_MAX_AGE_S,
    Rate,
    RateAction,
    RateDecision,
    RateOrigin,
    ServiceAnswer,
    decide_rate,
)
from gateway.core.failures.retry import CURRENCY, RetryPolicy
from gateway.core.money import check_currency
from gateway.errors import RateServiceUnavailable, UnsupportedPair

log = logging.getLogger(__name__)


def utc_now() -> datetime:
    """The current time, timezone-aware."""
    return datetime.now(UTC)


def parse_rate(base: str, quote: str, doc: Any) -> Rate:
    """A `Rate` from `{"rate": "0.9213", "as_of": "<RFC 3339>"}`; ValueError if unreadable."""
    if not isinstance(doc, Mapping):
        raise ValueError("rate document is not an object")
    raw_rate, raw_as_of = doc.get("rate"), doc.get("as_of")
    # A JSON float would be rounded twice; accept it only through its shortest repr.
    if isinstance(raw_rate, bool) or not isinstance(raw_rate, str | int | float):
        raise ValueError(f"rate is {type(raw_rate).__name__}")
    if not isinstance(raw_as_of, str):
        raise ValueError(f"as_of is {type(raw_as_of).__name__}")
    try:
        rate = Decimal(str(raw_rate))
    except InvalidOperation:
        raise ValueError(f"rate {raw_rate!r} is not a number") from None
    as_of = datetime.fromisoformat(raw_as_of)
    return Rate(base=base, quote=quote, rate=rate, as_of=as_of)


class CurrencyClient:
    """The currency-service: `GET {base_url}/rates/{BASE}/{QUOTE}`, bounded by `timeout_s`."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, *, timeout_s: float = 2.0) -> None:
        self._http = http
        self._base_url = base_url.rstrip("/")
        self._timeout_s = timeout_s

    async def fetch(self, base: str, quote: str) -> Rate:
        """The service's current rate; `UnsupportedPair` or `RateServiceUnavailable`."""
        url = f"{self._base_url}/rates/{base}/{quote}"
        try:
            # One deadline for the whole exchange: httpx's own timeouts are per phase, and
            # a server that trickles bytes could otherwise hold us for much longer.
            async with asyncio.timeout(self._timeout_s):
                response = await self._http.get(url, timeout=self._timeout_s)
        except (TimeoutError, httpx.TimeoutException) as exc:
            raise RateServiceUnavailable(
                f"{base}/{quote}: no answer within {self._timeout_s} s"
            ) from exc
        except httpx.HTTPError as exc:
            raise RateServiceUnavailable(f"{base}/{quote}: {type(exc).__name__}") from exc
        if response.status_code == httpx.codes.NOT_FOUND:
            raise UnsupportedPair(f"the currency-service does not quote {base}/{quote}")
        if response.status_code != httpx.codes.OK:
            raise RateServiceUnavailable(f"{base}/{quote}: HTTP {response.status_code}")
        try:
            return parse_rate(base, quote, response.json())
        except ValueError as exc:  # includes JSONDecodeError and a bad timestamp
            raise RateServiceUnavailable(f"{base}/{quote}: unreadable answer: {exc}") from exc


class RateCache:
    """The last rate fetched per pair, in Redis hashes `{prefix}:{BASE}:{QUOTE}`."""

    def __init__(
        self,
        redis_client: aioredis.Redis,
        *,
        key_prefix: str = "fx",
        ttl_s: int = 7 * 86_400,
        timeout_s: float = 0.5,
    ) -> None:
        self._redis = redis_client
        self._prefix = key_prefix
        # Kept far longer than a rate stays valid, so an expired rate is still seen and
        # the failure is reported as RATE_STALE rather than RATE_UNAVAILABLE.
        self._ttl_s = ttl_s
        self._timeout_s = timeout_s

    def key(self, base: str, quote: str) -> str:
        """The Redis key of a pair."""
        return f"{self._prefix}:{base}:{quote}"

    async def get(self, base: str, quote: str) -> Rate | None:
        """The cached rate, or None when absent, unreadable, or Redis is unreachable."""
        try:
            async with asyncio.timeout(self._timeout_s):
                stored = await self._redis.hgetall(self.key(base, quote))
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            log.warning(
                "rate cache unavailable",
                extra={"op": "read", "pair": f"{base}/{quote}", "error": repr(exc)},
            )
            return None
        if not stored:
            return None
        doc = {_text(k): _text(v) for k, v in stored.items()}
        try:
            return parse_rate(base, quote, doc)
        except ValueError as exc:
            log.warning(
                "rate cache entry unreadable",
                extra={"key": self.key(base, quote), "error": str(exc)},
            )
            return None

    async def put(self, rate: Rate) -> None:
        """Store `rate`; a Redis failure is logged and otherwise ignored."""
        key = self.key(rate.base, rate.quote)
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._redis.pipeline(transaction=True) as pipe:
                    pipe.hset(
                        key, mapping={"rate": str(rate.rate), "as_of": rate.as_of.isoformat()}
                    )
                    pipe.expire(key, self._ttl_s)
                    await pipe.execute()
        except (redis.exceptions.RedisError, OSError, TimeoutError) as exc:
            log.warning(
                "rate cache unavailable", extra={"op": "write", "key": key, "error": repr(exc)}
            )


class NoRateCache:
    """No cache at all (no `[redis] url`): every rate comes from the currency-service, so
    while it is down payments wait in their retries and then in the dead-letter table."""

    async def get(self, base: str, quote: str) -> Rate | None:
        return None

    async def put(self, rate: Rate) -> None:
        return None


def _text(value: str | bytes) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


class RateSource:
    """Rates by the error policy: the service first, the cache as fallback, and when
    neither serves, the delay before the caller's next try (it never sleeps itself)."""

    def __init__(
        self,
        client: CurrencyClient,
        cache: RateCache | NoRateCache,
        *,
        max_age_s: float = DEFAULT_MAX_AGE_S,
        policy: RetryPolicy = CURRENCY,
        clock: Callable[[], datetime] = utc_now,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._client = client
        self._cache = cache
        self._max_age_s = max_age_s
        self._policy = policy
        self._clock = clock
        self._rand = rand

    async def decide(self, base: str, quote: str, *, attempt: int = 1) -> RateDecision:
        """One try (number `attempt`, 1-based) and what to do next; never sleeps.

        For a consumer that retries by redelivery: on RETRY, `nak` with `delay_s`; on
        FAIL, dead-letter with `error`; on USE, convert with `rate`.
        """
        base, quote = check_currency(base), check_currency(quote)
        now = self._clock()
        if base == quote:
            same = Rate(base=base, quote=quote, rate=Decimal(1), as_of=now)
            return RateDecision(RateAction.USE, rate=same, origin=RateOrigin.IDENTITY)
        fresh: Rate | None = None
        try:
            fresh = await self._client.fetch(base, quote)
            answer = ServiceAnswer.ANSWERED
        except UnsupportedPair:
            answer = ServiceAnswer.UNSUPPORTED
        except RateServiceUnavailable as exc:
            answer = ServiceAnswer.DOWN
            log.info(
                "currency-service down",
                extra={"pair": f"{base}/{quote}", "attempt": attempt, "error": str(exc)},
            )
        # The cache is read only when it could matter: no usable fresh rate, pair supported.
        cached: Rate | None = None
        usable_fresh = fresh is not None and fresh.is_valid(now, self._max_age_s)
        if not usable_fresh and answer is not ServiceAnswer.UNSUPPORTED:
            cached = await self._cache.get(base, quote)
        decision = decide_rate(
            base=base,
            quote=quote,
            attempt=attempt,
            answer=answer,
            fresh=fresh,
            cached=cached,
            now=now,
            rand=self._rand,
            max_age_s=self._max_age_s,
            policy=self._policy,
        )
        if decision.origin is RateOrigin.SERVICE and decision.rate is not None:
            await self._cache.put(decision.rate)
        elif decision.origin is RateOrigin.CACHE and decision.rate is not None:
            log.warning(
                "no fresh rate from the currency-service: using the cached rate",
                extra={
                    "pair": decision.rate.pair,
                    "rate": str(decision.rate.rate),
                    "age_s": round(decision.rate.age_s(now), 1),
                },
            )
        return decision
